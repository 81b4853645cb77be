"""Stage 0: ``hookbridge upgrade PATH [--write]`` makes a TF1 tree run on TF 2.15 (with
tensorflow-estimator) and its hooks import on TF 2.21.

The spec, as the command runs it:

* every ``.py`` file under PATH is read (never imported) and, if it imports ``tensorflow``
  and anything in it is a name a rule reacts to, rewritten in memory by
  :func:`engine.upgrade_source`: hookbridge's rules (:mod:`.rules`: hooks to
  ``tf.compat.v1.train``, canned Estimators kept V1, the names TF's tables dropped after 2.15,
  absl flags, tf-slim layers, ``dimension_value``), then TensorFlow's own ``tf_upgrade_v2``
  (its rename tables and ``ast_edits`` engine, formatting and comments kept);
* without ``--write`` the report and a unified diff are printed; with it, :func:`tree.write`
  applies every change or none, keeping the originals and the patch in
  ``PATH/.hookbridge-upgrade/<time>/``;
* what no rule can rewrite stays a finding (``ERROR``), with TF's own notes (``WARNING``);
* a second run over an upgraded tree changes nothing.
"""

from __future__ import annotations

from hookbridge._migrate.upgrade.tree import BACKUP_DIR, Plan, plan, write

__all__ = ["BACKUP_DIR", "Plan", "plan", "write"]
