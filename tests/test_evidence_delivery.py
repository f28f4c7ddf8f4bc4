"""docs/evidence.md's delivered-once section is what scripts/evidence_delivery.py measures now."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_the_delivery_evidence_in_the_docs_is_not_stale() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "evidence_delivery.py"), "--check", str(ROOT / "docs" / "evidence.md")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def test_the_section_is_replaced_in_place_and_the_rest_of_the_file_kept() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from evidence_delivery import BEGIN, END, merged

    section = f"{BEGIN}\nnew figures\n{END}\n"
    assert merged("# Recall\n\ntext\n", section) == f"# Recall\n\ntext\n\n{section}"
    assert merged(f"# Recall\n\n{BEGIN}\nold\n{END}\n", section) == f"# Recall\n\n{section}"
