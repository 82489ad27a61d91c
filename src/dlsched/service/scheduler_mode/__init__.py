"""``dlsched serve --mode scheduler``: dlsched as a Kubernetes scheduler of its own.

Pods whose ``spec.schedulerName`` is dlsched's name are watched (:mod:`.watch`), checked against
the nodes as kube-scheduler would (:mod:`.fit`: node selector, taints, cordons, requests), and
their feasible nodes restrict the kernel's placement (``SchedulerCore.offered``); every
nomination is bound by a Binding posted directly (:mod:`.binder`). :mod:`.driver` wires it.
"""
