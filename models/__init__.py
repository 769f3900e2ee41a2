"""The workload model files shipped with palopt, installed as the package ``palopt.models``
(see ``pyproject.toml``); ``palopt.workloads.ARTIFACT_WORKLOADS`` is the path of the PAL
artifact's."""
