"""The Tau controller: reconciles TauCluster, TauWorkspace and TauQuotaRequest objects (control-plane.md §2).

Built on kopf: kopf watches, this package's reconcilers decide.  Every watched event is mapped to the key of the
object it concerns (a workspace, the singleton TauCluster, a quota request) and queued; one worker per kind
reconciles each key level-triggered, the way controller-runtime does, and requeues it on the reference's intervals.
"""

__version__ = "0.5.0"
