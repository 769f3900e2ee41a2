"""The benchmark of placement solvers against the optimum (``palopt bench``).

:mod:`.families` makes instance families; :mod:`.runner` solves them with every solver and
measures gaps to the optimum or a bound; :mod:`.report` prints the table, writes the CSV and the
plot. Results of the full run are recorded in ``bench/README.md``.
"""
