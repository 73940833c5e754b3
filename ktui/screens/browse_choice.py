"""One thing the browser can fetch (a kernel function's parameter or
member, a tracepoint's field, a file's a1..a6), apart from what lists
them: browse_model (kernel functions) and browse_places (the rest) both
make them, and the screen ticks them alike."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Choice:
    """One thing the browser can fetch: a parameter, a member, or retval."""

    ref: str  # as the spec writes it: `count`, `file->f_pos`, `args.flags`, `retval`
    shown: str  # `size_t count`, `loff_t f_pos`
    why_not: str  # why it cannot be ticked; "" when it can
    depth: int = 0  # 0 a parameter or retval, 1 a member of one
    text: bool = False  # a char pointer or array: `:string` / `:ustring` may be picked
    default_type: str = ""  # `string` for a char array (its bytes, not an address)
    type_id: int = 0  # a pointer to a struct: what its members are looked up from
    expandable: bool = False  # a parameter pointing to a struct or union with members
    register: str = ""  # `a3`: where the parameter arrives
    pointee: "Choice | None" = None  # a parameter pointing to a number: the number itself

    @property
    def tickable(self) -> bool:
        return not self.why_not
