"""The city's shared state copied onto a server (fogsdn.city.site_mirror): the board, the
truth files and the epoch land under the run's folder as the clients read them there,
and a line it cannot apply, or a path outside the run's folder, is one line naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fogsdn.city.fog_daemon import MemberBoard
from fogsdn.city.site_mirror import MirrorError, mirror


def test_the_board_files_and_folders_land_as_the_clients_read_them(tmp_path: Path) -> None:
    root = tmp_path / "fz0001"
    point = root / "random-0.5"
    lines = [json.dumps({"mkdir": str(point / "truth")}),
             json.dumps({"board": str(point / "members.bin"), "counts": [3, 0, 7]}),
             json.dumps({"files": {str(point / "truth" / "c1.json"): {"t": 1.5},
                                   str(point / "epoch"): 12.25}}),
             "",
             json.dumps({"board": str(point / "members.bin"), "counts": [2, 1, 7]})]
    assert mirror(root, lines) == 4
    board = MemberBoard(point / "members.bin", ["fog0", "fog1", "fog2"])
    try:
        assert board.read() == {"fog0": 2, "fog1": 1, "fog2": 7}
    finally:
        board.close()
    assert json.loads((point / "truth" / "c1.json").read_text()) == {"t": 1.5}
    assert json.loads((point / "epoch").read_text()) == 12.25


@pytest.mark.parametrize(("line", "why"), [
    ('{"mkdir": "/etc/x"}', "not under"),
    ('{"files": {"ROOT/../escape.json": 1}}', "not under"),
    ('{"board": "ROOT/b", "counts": [1, -2]}', "counts"),
    ('{"board": "ROOT/b", "counts": [1.5]}', "counts"),
    ('{"files": [1]}', "files"),
    ('{"what": 1}', "unknown message"),
    ("[1]", "a JSON object"),
    ("{not json", "not JSON"),
])
def test_a_line_it_cannot_apply_names_why(tmp_path: Path, line: str, why: str) -> None:
    root = tmp_path / "fz0001"
    with pytest.raises(MirrorError, match=why):
        mirror(root, [line.replace("ROOT", str(root))])
    assert not (tmp_path / "escape.json").exists()


def test_the_process_ends_with_one_line_and_status_2(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "fogsdn.city.site_mirror", "--root",
                        str(tmp_path / "fz0001")], input='{"mkdir": "/etc/x"}\n',
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not under" in r.stderr
    r = subprocess.run([sys.executable, "-m", "fogsdn.city.site_mirror", "--root",
                        str(tmp_path / "fz0001")], input="", capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0  # the end of stdin: the run's end
