"""Exact placement: one model of the cost objective (:mod:`.model`), solved by CP-SAT
(:mod:`.cpsat`) or by a MILP through PuLP (:mod:`.milp`), driven by :mod:`.runner`; the
configuration LP's bound by column generation (:mod:`.colgen`, priced in :mod:`.pricing`)."""
