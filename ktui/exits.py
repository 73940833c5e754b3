"""The exit statuses of the `ktui` command, in one place.

    0    ok
    1    invalid input: a probe set, spec, filter, recording, --comm or `export --web-config` file
    2    usage: the command line itself (an unknown option, a number out of range);
         one line, `ktui: ...`, like every other error
    3    this machine cannot run probes (not root, no kprobes, no bcc, lockdown, set-uid)
    4    a runtime failure (the BPF program did not compile, the dashboard failed)
    130  stopped by a signal before the probes were attached (stream/record),
         or by Ctrl-C before a command's own handling began (`ktui: interrupted`)

It imports nothing, so any layer may use it; today the command line, the
headless commands and the dashboard do. docs/bad-inputs.md lists which
input ends in which status.
"""

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3
EXIT_RUNTIME = 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process a signal stopped
