"""Local stub servers for tests (loopback only)."""

from tests.helpers.stubs.openai_server import OpenAIStub, Reply, StubRequest

__all__ = ["OpenAIStub", "Reply", "StubRequest"]
