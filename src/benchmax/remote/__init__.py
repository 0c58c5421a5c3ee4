"""An env served by ``benchmax serve``, seen from the client: the proxy and the wire format both sides speak.

:class:`RemoteEnv` is a ``BaseEnv`` whose hooks are HTTP calls to the server; :mod:`benchmax.remote.wire`
is how an env's records, errors and termination reasons cross the wire, imported by the proxy here and by
``benchmax.serve`` on the other end, so the two sides cannot drift apart.
"""

from benchmax.remote import wire
from benchmax.remote._proxy import MAX_REPLY_BYTES, RemoteDataset, RemoteEnv, is_remote_spec, remote_env_class

__all__ = ["MAX_REPLY_BYTES", "RemoteDataset", "RemoteEnv", "is_remote_spec", "remote_env_class", "wire"]
