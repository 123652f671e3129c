# Summarise this repository's Rust sources per top-level folder: files, lines, and how often
# `unsafe` and `TODO` appear. Written as a model would write a run_code program.
import asyncio
import re

files = await tools.list_files(dir=".", suffix=".rs")
print(f"found {len(files)} Rust files")

# Every read is parallel-safe, so all of them are started at once and awaited together.
windows = await asyncio.gather(*[tools.read_file(path=f["path"]) for f in files])

per_folder = {}
for file, window in zip(files, windows):
    path = file["path"]
    folder = path.split("/", 1)[0] if "/" in path else "(root)"
    totals = per_folder.setdefault(folder, {"files": 0, "lines": 0, "unsafe": 0, "todo": 0})
    totals["files"] += 1
    totals["lines"] += window["total_lines"]
    for line in window["lines"]:
        if re.search(r"\bunsafe\b", line):
            totals["unsafe"] += 1
        if re.search(r"\bTODO\b", line):
            totals["todo"] += 1

summary = sorted(
    ({"folder": folder, **totals} for folder, totals in per_folder.items()),
    key=lambda s: (-s["lines"], s["folder"]),
)
print(f"read {sum(s['lines'] for s in summary)} lines")
return summary
