"""Every error agentd raises on purpose, split by what the caller must do.

AgentdError                      base; `str(e)` is a complete message for a human
├── ConfigError                  fix the config file (file:line, key, what to change) → exit 2
├── UsageError                   fix the command line or its input (bad JSON, bad time) → exit 2
├── NotFound                     an id that does not exist → exit 1
├── Refused                      a valid request the current state forbids → exit 1
│   └── Unchanged                what was asked already holds (pause a paused goal) → exit 0
├── StateError                   the database cannot be used (read-only, locked, newer schema)
│   └── DaemonRunning            another daemon holds the state directory
├── ModelError                   the model call failed; the run sleeps and retries durably
├── ModelRejected                the provider refused the request (bad key, bad request): stop
├── ModelOutputInvalid           the reply did not validate; re-ask with the error, then escalate
├── ActionFailed                 an action could not run; fed back to the run as an observation
└── DeliveryFailed               a notification did not go out; the outbox retries it with backoff
"""

from __future__ import annotations


class AgentdError(Exception):
    """Base class: the message is meant for the operator, without a traceback."""

    exit_code = 1


class ConfigError(AgentdError):
    """The config file is invalid: the message names the file, the line or key, and what to fix."""

    exit_code = 2


class UsageError(AgentdError):
    """The command line or its input is malformed (bad JSON, bad time, unknown option value)."""

    exit_code = 2


class NotFound(AgentdError):
    """No goal, run, inbox item or event has that id; `agentd goal list` and friends show the ids."""

    exit_code = 1


class Refused(AgentdError):
    """The request is well-formed but the current state forbids it (e.g. approving a denied item)."""

    exit_code = 1


class Unchanged(Refused):
    """What was asked already holds (pause a paused goal, dismiss a dismissed item): nothing
    changed and nothing is wrong. The command line prints the message as a note and exits 0; a
    caller that counts refusals may treat it as one (nothing new was granted)."""

    exit_code = 0


class StateError(AgentdError):
    """The state directory or database cannot be used as it is (permissions, lock, schema version)."""

    exit_code = 1


class DaemonRunning(StateError):
    """Another `agentd serve` already owns this state directory; stop it or use another --home."""


class ModelError(AgentdError):
    """A model call failed in a way worth retrying later (rate limit, overload, timeout, network).

    `retry_after_s` is the provider's hint, if any; the engine turns it into a durable wake time.
    """

    def __init__(
        self, message: str, *, retry_after_s: float | None = None, timed_out: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.timed_out = timed_out  # the call was abandoned: the server may have served it


class ModelRejected(AgentdError):
    """The provider refused the request in a way retrying cannot fix (authentication, an unknown
    model, an invalid request, a prompt past the context): the run stops retrying and waits for
    the operator, who gets one inbox item naming the cause and the fix — no retry storm.

    `reason` is "auth", "model", "request", "format" or "context"; `cause` what the server said;
    `fix` what to change; `context_tokens` the server's context when its message names it."""

    def __init__(
        self,
        message: str,
        *,
        reason: str = "request",
        cause: str = "",
        fix: str = "",
        context_tokens: int | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.cause = cause or message
        self.fix = fix
        self.context_tokens = context_tokens


class ModelOutputInvalid(AgentdError):
    """The model's reply is not a valid action from the menu; the run re-asks with this message."""


class ActionFailed(AgentdError):
    """An action could not be carried out; the run sees this message as the action's result."""


def require_utf8(what: str, value: str, where: str = "the terminal's locale (LANG)") -> None:
    """UsageError when `value` holds bytes Python could not decode (surrogate-escaped argv)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UsageError(
            f"{what} is not valid UTF-8 (an undecodable byte at character {e.start + 1}); "
            f"agentd takes UTF-8 text: check {where}"
        ) from None


class DeliveryFailed(AgentdError):
    """A notification channel did not take a message (down, refused, timed out): the outbox
    records the error and tries again later; `agentd doctor` shows the channel as failing."""
