"""store/local.py: what a read worker sends back of the records it read."""

from __future__ import annotations

from pathlib import Path

from index_synth import add_kernel
from kernel_factory.record import Record
from kernel_factory.store.local import _VALUES, _read_in_worker

CPU = "torch213-cxx11-cpu-x86_64-linux"


def test_a_worker_sends_each_record_whole_and_equal_strings_once(tmp_path: Path) -> None:
    root = tmp_path / "store"
    for version in ("1.1.0", "1.1.2"):
        add_kernel(root, "img2grey", version, CPU)
    folder = root / "files"
    wheels = sorted(p.name[:-5] for p in folder.glob("*.whl.json"))
    sent = _read_in_worker(str(folder), wheels)
    assert [wheel for wheel, *_ in sent] == wheels
    for _wheel, values, text, why in sent:
        assert why is None and text is not None and values is not None
        assert Record(*values) == Record.from_json(text.encode())
        assert values == _VALUES(Record.from_json(text.encode()))
    first, second = sent[0][1], sent[1][1]
    assert first is not None and second is not None
    kind = Record.__slots__.index("kind")
    assert first[kind] == second[kind] == "kernel" and first[kind] is second[kind]
