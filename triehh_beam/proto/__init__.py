"""Generated protobuf modules (``trie_pb2``, ``vote_pb2``, ...); do not edit: the sources are
the .proto files under ``protos/``; regenerate with ``python protos/generate.py``
(``--check`` verifies the checked-in modules are current).
"""
