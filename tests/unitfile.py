"""contrib/export/ktui-export.service read as systemd reads it (the
[Service] section's settings; a setting given twice keeps both values),
for the host test of its sandboxing and the kernel test that runs the
exporter with exactly its capabilities."""

from __future__ import annotations

from pathlib import Path

UNIT = Path(__file__).resolve().parent.parent / "contrib" / "export" / "ktui-export.service"


def service_settings(path: Path = UNIT) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    section = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        if section == "Service":
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def capabilities(settings: dict[str, list[str]], key: str = "AmbientCapabilities") -> set[str]:
    """The capability names of a setting, lower case without CAP_ (setpriv's spelling)."""
    return {word.removeprefix("CAP_").lower() for value in settings.get(key, []) for word in value.split()}
