"""The nightly sweep and its evidence: every case with fresh inputs, every result kept.

    recorder.py      pytest plugin (-p e2egen.nightly.recorder --e2e-record PATH.jsonl): one record per finished case
    sweep_plugin.py  pytest plugin: --e2e-select-cases / --e2e-deselect-cases, --e2e-reference-device, GPU pinning
    case_filter.py   which case ids a pytest session may run (shared by both plugins)
    records.py       CaseRecord and the JSON-lines records files (safe appends, torn-line tolerant reads)
    store.py         the SQLite results store: runs, records, metrics; readers for calibration and PR selection
    sweep.py         `e2egen nightly`: plan, run pytest, ingest as records arrive, resume, crash handling
    shard.py         --shard I/N: balanced, disjoint, deterministic parts
    merge.py         `e2egen merge`: shards (stores, records files, run ids) into one run
    machine.py       machine, versions, git revision, date seed
    report/          `e2egen report`: aggregates, histograms, worst cases, run comparison; HTML and Markdown
    evidence.py      observed metric values per (case, metric) over chosen runs, with what is missing
    calibrate.py     `e2egen calibrate`: tolerance proposals, floors, placement, the tomlkit edit
    pr_select.py     `e2egen select`: pairwise coverage, failures, headroom, within a time budget

Dependencies flow one way: nightly -> generator -> runner -> metrics.
"""
