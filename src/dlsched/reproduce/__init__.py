"""``dlsched reproduce``: each paper result dlsched reproduces, our table beside the paper's.

``base`` defines a reproduction and its tables, ``registry`` lists them, ``run`` runs one and
``render`` prints it as text, JSON or an HTML page. See docs/reproduce.md.
"""
