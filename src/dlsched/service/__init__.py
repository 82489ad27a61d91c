"""The live service: a Kubernetes scheduler extender driving the shared kernel (``docs/service.md``).

``pods`` reads pods and nodes, ``core`` turns them into kernel transitions and policy passes,
``store`` keeps assignments and the decision log durable, ``kube`` watches and binds through the
API server, ``extender`` is the wire format, ``app`` the HTTP endpoints, ``runtime`` wires them.
Needs the ``service`` extra (FastAPI, uvicorn, kubernetes, SQLAlchemy).
"""
