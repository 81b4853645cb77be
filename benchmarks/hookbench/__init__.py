"""hookbridge's benchmark, as a package a reader can take in one sitting.

* :mod:`hookbench.workloads` — the models, data, hook sets and their hand-written Keras
  equivalents that every case trains with;
* :mod:`hookbench.cases` — the named cases (a ``fit`` or a ``MonitoredSession`` with some hooks);
* :mod:`hookbench.timing` — how a case is timed (per-epoch slopes, gc frozen, interleaved repeats);
* :mod:`hookbench.report` — the targets, each a ratio of two cases of the same run, and the table;
* :mod:`hookbench.profile` — diagnostics: time inside the bridge's entry points, cProfile;
* :mod:`hookbench.memory` — the 50,000-step memory soak.

``benchmarks/bench.py`` is the command line over them.
"""
