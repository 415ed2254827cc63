"""A local TCP port that nothing listens on, for tests of what a client does when nobody answers
(verl's Ray head, the Hugging Face hub)."""

import socket


def unused_port() -> int:
    """A port on 127.0.0.1 that the kernel just handed out and that was closed again: connecting to it
    is refused (another process could take it meanwhile; nothing in a test run binds fixed ports)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
