"""Only for ``benchmax.store``, which still imports ``extract_completion_text`` from here.

Import from :mod:`benchmax.rewards`; this module goes once the store does.
"""

from benchmax.rewards._text import extract_completion_text

__all__ = ["extract_completion_text"]
