import re
from pathlib import Path

import wakeful

README = Path(__file__).resolve().parents[1] / "README.md"


def documented_names() -> set[str]:
    text = README.read_text()
    block = re.search(r"<!-- public-api:start -->(.*?)<!-- public-api:end -->", text, re.S)
    assert block, "README lacks the public-api block"
    return set(block.group(1).replace("```", "").split())


def test_all_is_what_the_readme_documents():
    assert set(wakeful.__all__) == documented_names()


def test_every_exported_name_exists():
    for name in wakeful.__all__:
        assert hasattr(wakeful, name), name
