"""GPU choices that reach the container (issue 34, point 5; docs/service.md "GPU binding").

``--gpu-binding envvar-configmap``: a mutating admission webhook moves a dlsched pod's
``nvidia.com/gpu`` request out of the device plugin's reach and points its containers at a
per-pod ConfigMap; at bind dlsched writes ``NVIDIA_VISIBLE_DEVICES`` there and holds each GPU it
uses on the node with a reservation pod, so that no other scheduler is handed it.
"""
