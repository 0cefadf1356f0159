"""detachlint: a static linter for autograd misuse in PyTorch code."""

__version__ = "0.1.0"

# Where each rule's documentation lives; `docs/rules.md` in the repository.
HOME_URL = "https://github.com/detachlint/detachlint"
DOCS_URL = HOME_URL + "/blob/main/docs/rules.md"


def rule_url(code: str, name: str) -> str:
    """The link to one rule's section of the rules page."""
    return f"{DOCS_URL}#{code.lower()}-{name}"
