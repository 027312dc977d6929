"""The shared MSAL token cache for Linux, over libtokencache's C interface (tokencache.h).

Every function blocks (D-Bus, file I/O, HTTP for acquire_token_silent, and the sign_in_* methods
until the user has signed in): in a GUI app call them from a worker thread. A Store (and a Watch) may be
shared by threads: close() (stop()) waits for the calls in flight, and a call after it raises
ClosedError. Failures raise TokenCacheError.

Secrets: the C library hands access tokens over in buffers it wipes on free; this module copies a
token into a Python str (which Python cannot wipe) and frees the buffer at once. Keep tokens out
of logs.
"""

from __future__ import annotations

import ctypes
import enum
import json
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, List, Optional, Tuple, Union

__all__ = ["Account", "AmbiguousAccountError", "Backend", "ClosedError", "DeviceCode", "NativePrompt", "Photo", "Store", "Token",
           "TokenCacheError", "Watch", "claims_from_www_authenticate", "diagnose", "library_version",
           "AMBIGUOUS_ACCOUNT", "NOT_FOUND", "INVALID_ARGUMENT", "INTERACTION_REQUIRED", "TIMED_OUT", "CANCELLED", "ACCESS_DENIED",
           "AUTHORIZATION_FAILED", "STATE_MISMATCH", "PORT_UNAVAILABLE", "BROWSER_UNAVAILABLE", "UNSUPPORTED_FLOW",
           "BROWSER_REQUIRED", "USER_NOT_FOUND", "INVALID_CREDENTIALS", "INVALID_CODE", "USER_ALREADY_EXISTS",
           "PASSWORD_POLICY", "ATTRIBUTE_VALIDATION", "EXPIRED", "NATIVE_AUTH_FAILED", "PORTAL_CANCELLED", "PORTAL_FAILED", "OVERLOADED"]

# Status codes of tokencache.h that callers commonly test; TokenCacheError.code carries any of them.
INVALID_ARGUMENT = 1
NOT_FOUND = 2
# An account named without an authority is at hosts of different clouds (libtokencache 0.3).
AMBIGUOUS_ACCOUNT = 5
TIMED_OUT = 17
INTERACTION_REQUIRED = 31
# Sandboxed apps: the Secret portal's request for the keyring secret (libtokencache 0.5).
PORTAL_CANCELLED = 41
PORTAL_FAILED = 42
# The process runs as many blocking calls as the library's thread ceiling allows; retry (libtokencache 0.6).
OVERLOADED = 43
# Sign-in (libtokencache 0.2).
CANCELLED = 50
ACCESS_DENIED = 51
AUTHORIZATION_FAILED = 52
STATE_MISMATCH = 53
PORT_UNAVAILABLE = 54
BROWSER_UNAVAILABLE = 55
UNSUPPORTED_FLOW = 56
# Native authentication (libtokencache 0.4).
BROWSER_REQUIRED = 60
USER_NOT_FOUND = 61
INVALID_CREDENTIALS = 62
INVALID_CODE = 63
USER_ALREADY_EXISTS = 64
PASSWORD_POLICY = 65
ATTRIBUTE_VALIDATION = 66
EXPIRED = 67
NATIVE_AUTH_FAILED = 68


class Backend(enum.IntEnum):
    """Which storage a store uses (tokencache_backend)."""
    AUTO = 0
    SECRET_SERVICE = 1
    FILE = 2


class NativePrompt(enum.IntEnum):
    """What a native-auth prompt asks the user for (tokencache_native_prompt)."""
    CODE = 1          # the code emailed to `detail` (a masked address); asked again after a wrong code
    PASSWORD = 2      # the password of the user `detail`
    NEW_PASSWORD = 3  # sign-up: a password for the new account `detail`
    ATTRIBUTE = 4     # sign-up: the value of the attribute named `detail`


class TokenCacheError(Exception):
    """A failed call: the C status code, its name, the reason (finer than the code: "no_display",
    "unlock_prompt_dismissed", ... as tokencache.h's TOKENCACHE_REASON_* without the prefix, "none" when
    there is none), what happened and what to do. Choose what to do by code and reason, not by the text."""

    def __init__(self, code: int, name: str, message: str, hint: str = "", reason: str = "none"):
        super().__init__(f"{message} ({hint})" if hint else message)
        self.code = code
        self.name = name
        self.reason = reason
        self.message = message
        self.hint = hint
        # The claims (JSON) to sign in with, when a refresh with claims_challenge was refused for them
        # (INTERACTION_REQUIRED, e.g. AADSTS50076), as MSAL Python's result["claims"]; else None.
        self.claims: Optional[str] = None


class AmbiguousAccountError(TokenCacheError):
    """An account named without an authority is at hosts of different clouds (another host may have
    saved a response claiming its home account ID): nothing is guessed. The message names the hosts;
    pass the authority the account signed in at."""


class ClosedError(TokenCacheError):
    """A call on a Store that is closed (or closing), or a Watch that is stopped."""

    def __init__(self, what: str):
        super().__init__(INVALID_ARGUMENT, "TOKENCACHE_E_INVALID_ARGUMENT", f"Invalid {what}: is closed.",
                         f"Open a new one; a closed {what} cannot be used again")


class _Handle:
    """A C handle shared by threads: each call holds it (use()), and release() waits until no call
    does before freeing it once, so no call ever runs on a freed handle (C forbids closing a store
    another thread uses)."""

    def __init__(self, pointer: int, what: str):
        self._pointer = pointer
        self._what = what
        self._users = {}  # thread id -> calls of that thread in flight
        self._freed = False
        self._changed = threading.Condition(threading.Lock())

    def held_here(self) -> bool:
        """Whether this thread is inside a call (or callback) holding the handle."""
        return threading.get_ident() in self._users

    def use(self) -> "_Use":
        with self._changed:
            if self._pointer is None:
                raise ClosedError(self._what)
            thread = threading.get_ident()
            self._users[thread] = self._users.get(thread, 0) + 1
            return _Use(self, self._pointer)

    def _done(self) -> None:
        with self._changed:
            thread = threading.get_ident()
            self._users[thread] -= 1
            if not self._users[thread]:
                del self._users[thread]
            self._changed.notify_all()

    def release(self, free: Callable[[int], None], before: Callable[[], None] = lambda: None) -> None:
        """Refuses new calls, waits for those in flight, runs before(), then free(pointer); returns once freed,
        in every thread that calls it. Raises TokenCacheError when called from inside a call on this handle
        (that wait would never end)."""
        with self._changed:
            if self.held_here():
                raise TokenCacheError(INVALID_ARGUMENT, "TOKENCACHE_E_INVALID_ARGUMENT",
                                      f"Invalid {self._what}: cannot be closed from inside one of its own calls or callbacks.",
                                      "Close it after the call has returned, from any thread")
            if self._pointer is None:  # closed, or closing in another thread
                while not self._freed:
                    self._changed.wait()
                return
            pointer, self._pointer = self._pointer, None
            while self._users:
                self._changed.wait()
        try:
            before()
            free(pointer)
        finally:
            with self._changed:
                self._freed = True
                self._changed.notify_all()


class _Use:
    """One call's hold on a _Handle (a with block)."""

    def __init__(self, handle: _Handle, pointer: int):
        self._handle = handle
        self.pointer = pointer

    def __enter__(self) -> int:
        return self.pointer

    def __exit__(self, *exc) -> None:
        self._handle._done()


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 512), ("hint", ctypes.c_char * 512)]


_ACCOUNTS_CHANGED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_Error), ctypes.c_void_p)
_DEVICE_CODE = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
# int (*)(tokencache_native_prompt what, const char *detail, char *answer, size_t answer_size, void *user_data)
_NATIVE_PROMPT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_P = ctypes.c_void_p
_S = ctypes.c_char_p
_PROTOTYPES = {
    "tokencache_version": (_S, []),
    "tokencache_status_name": (_S, [ctypes.c_int]),
    "tokencache_error_reason": (ctypes.c_int, [ctypes.POINTER(_Error)]),
    "tokencache_reason_name": (_S, [ctypes.c_int]),
    "tokencache_store_open": (ctypes.c_int, [_S, ctypes.c_int, ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_store_close": (None, [_P]),
    "tokencache_store_accounts": (ctypes.c_int, [_P, _S, ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_accounts_count": (ctypes.c_size_t, [_P]),
    "tokencache_accounts_home_account_id": (_S, [_P, ctypes.c_size_t]),
    "tokencache_accounts_environment": (_S, [_P, ctypes.c_size_t]),
    "tokencache_accounts_username": (_S, [_P, ctypes.c_size_t]),
    "tokencache_accounts_local_account_id": (_S, [_P, ctypes.c_size_t]),
    "tokencache_accounts_tenant_id": (_S, [_P, ctypes.c_size_t]),
    "tokencache_accounts_free": (None, [_P]),
    # Secrets come back as void* (not c_char_p, which would copy and lose the pointer to free).
    "tokencache_store_find_access_token": (ctypes.c_int, [_P, _S, _S, _S, _S, ctypes.POINTER(_P), ctypes.POINTER(_P),
                                                          ctypes.POINTER(_Error)]),
    "tokencache_acquire_token_silent": (ctypes.c_int, [_P, _S, _S, _S, _S, ctypes.c_uint, ctypes.POINTER(_P),
                                                       ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_sign_in_device_code": (ctypes.c_int, [_P, _S, _S, _S, _DEVICE_CODE, _P, ctypes.c_uint, ctypes.POINTER(_P),
                                                      ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_sign_in_browser": (ctypes.c_int, [_P, _S, _S, _S, _S, ctypes.c_uint, ctypes.POINTER(_P), ctypes.POINTER(_P),
                                                  ctypes.POINTER(_Error)]),
    "tokencache_store_set_sso_stores": (ctypes.c_int, [_P, _S, ctypes.POINTER(_Error)]),
    "tokencache_store_set_client_capabilities": (ctypes.c_int, [_P, _S, ctypes.POINTER(_Error)]),
    "tokencache_store_set_broker": (ctypes.c_int, [_P, ctypes.c_uint, ctypes.POINTER(_Error)]),
    "tokencache_claims_from_www_authenticate": (ctypes.c_int, [_S, ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_acquire_token_with_claims": (ctypes.c_int, [_P, _S, _S, _S, _S, _S, ctypes.POINTER(_P), ctypes.POINTER(_P),
                                                            ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_store_save_response": (ctypes.c_int, [_P, _S, _S, _S, ctypes.c_char_p, ctypes.c_size_t,
                                                      ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_secret_free": (None, [_P]),
    "tokencache_token_info_expires_on": (ctypes.c_int64, [_P]),
    "tokencache_token_info_scheme": (_S, [_P]),
    "tokencache_token_info_scopes": (_S, [_P]),
    "tokencache_token_info_tenant_id": (_S, [_P]),
    "tokencache_token_info_home_account_id": (_S, [_P]),
    "tokencache_token_info_username": (_S, [_P]),
    "tokencache_token_info_is_from_cache": (ctypes.c_int, [_P]),
    "tokencache_token_info_free": (None, [_P]),
    "tokencache_store_sign_out": (ctypes.c_int, [_P, _S, _S, ctypes.POINTER(_Error)]),
    "tokencache_store_remove_account": (ctypes.c_int, [_P, _S, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_Error)]),
    "tokencache_store_watch_accounts": (ctypes.c_int, [_P, _S, ctypes.c_uint, _ACCOUNTS_CHANGED, _P, ctypes.POINTER(_P),
                                                       ctypes.POINTER(_Error)]),
    "tokencache_watch_stop": (None, [_P]),
    "tokencache_diagnose": (ctypes.c_int, [_S, ctypes.c_int, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_int),
                                           ctypes.POINTER(_Error)]),
    "tokencache_string_free": (None, [_P]),
    "tokencache_account_photo": (ctypes.c_int, [_P, _S, _S, _S, ctypes.c_uint, ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_photo_free": (None, [_P]),
    "tokencache_native_sign_in": (ctypes.c_int, [_P, _S, _S, _S, _S, _S, _NATIVE_PROMPT, _P, ctypes.POINTER(_P),
                                                 ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_native_sign_up": (ctypes.c_int, [_P, _S, _S, _S, _S, _S, _S, _NATIVE_PROMPT, _P, ctypes.POINTER(_P),
                                                 ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
    "tokencache_native_reset_password": (ctypes.c_int, [_P, _S, _S, _S, _S, _S, _NATIVE_PROMPT, _P, ctypes.POINTER(_P),
                                                        ctypes.POINTER(_P), ctypes.POINTER(_Error)]),
}


_AT_SECURE = 23  # <elf.h>


def _secure_execution() -> bool:
    """Whether the kernel started this process in secure-execution mode (setuid, setgid, or file
    capabilities: AT_SECURE), as secure_getenv asks; uid checks alone miss a capability binary."""
    try:
        getauxval = ctypes.CDLL(None, use_errno=True).getauxval
    except (OSError, AttributeError):
        getauxval = None
    if getauxval is not None:
        getauxval.restype = ctypes.c_ulong
        getauxval.argtypes = [ctypes.c_ulong]
        if getauxval(_AT_SECURE) != 0:
            return True
    return os.getuid() != os.geteuid() or os.getgid() != os.getegid()


def _library_path() -> str:
    """TOKENCACHE_LIBRARY, unless the process runs in secure-execution mode (setuid, setgid, file
    capabilities): then the system's library, as secure_getenv would have it (another user must
    not choose the code a privileged process loads)."""
    return (None if _secure_execution() else os.environ.get("TOKENCACHE_LIBRARY")) or _installed_library() or "libtokencache.so.0"


def _installed_library() -> Optional[str]:
    """The library a release tarball's install.sh installed beside this copy of the binding (it
    writes _installed.py), which the loader may not search (~/.local/lib); None elsewhere."""
    try:
        from ._installed import LIBRARY  # type: ignore[import-not-found]
    except ImportError:
        return None
    return str(LIBRARY)


def _load() -> ctypes.CDLL:
    library = ctypes.CDLL(_library_path())
    for name, (restype, argtypes) in _PROTOTYPES.items():
        function = getattr(library, name)
        function.restype = restype
        function.argtypes = argtypes
    return library


_lib = _load()


def _text(value: Optional[bytes]) -> str:
    return value.decode("utf-8") if value is not None else ""


def _arg(value: Optional[str], name: str) -> Optional[bytes]:
    """A str argument as UTF-8; None stays NULL. Lone surrogates cannot be UTF-8: refused here."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise TokenCacheError(INVALID_ARGUMENT, "TOKENCACHE_E_INVALID_ARGUMENT", f"Invalid {name}: is not valid UTF-8.")


def _scopes(scopes: Union[str, List[str]]) -> bytes:
    return _arg(scopes if isinstance(scopes, str) else " ".join(scopes), "scopes")


def _error(status: int, error: _Error) -> TokenCacheError:
    """The exception for a status and the error struct the call filled."""
    reason = _text(_lib.tokencache_reason_name(_lib.tokencache_error_reason(ctypes.byref(error))))
    return (AmbiguousAccountError if status == AMBIGUOUS_ACCOUNT else TokenCacheError)(
        status, _text(_lib.tokencache_status_name(status)), _text(error.message), _text(error.hint),
        reason.removeprefix("TOKENCACHE_REASON_").lower())


def _check(status: int, error: _Error) -> None:
    if status != 0:
        raise _error(status, error)


def library_version() -> str:
    """The loaded libtokencache's version, "MAJOR.MINOR.PATCH"."""
    return _text(_lib.tokencache_version())


@dataclass(frozen=True)
class Account:
    """An account as an app sees it."""
    home_account_id: str
    environment: str
    username: str
    local_account_id: str
    tenant_id: str


@dataclass(frozen=True)
class DeviceCode:
    """What to show the user of a device code sign-in: the code to enter at verification_uri, and the
    authority's instructions saying both."""
    user_code: str
    verification_uri: str
    message: str


@dataclass(frozen=True)
class Photo:
    """An account's Microsoft Graph photo: the image's bytes and its MIME type ("image/jpeg")."""
    data: bytes
    content_type: str

    def __repr__(self) -> str:
        return f"Photo(content_type={self.content_type!r}, {len(self.data)} bytes)"


@dataclass(frozen=True)
class Token:
    """A usable access token and what a caller needs to send it. access_token is a secret."""
    access_token: str = ""
    expires_on: datetime = datetime.fromtimestamp(0, timezone.utc)
    scheme: str = "Bearer"
    scopes: Tuple[str, ...] = ()
    tenant_id: str = ""
    home_account_id: str = ""
    username: str = ""
    is_from_cache: bool = True

    def __repr__(self) -> str:  # never print the token itself
        return f"Token(scheme={self.scheme!r}, expires_on={self.expires_on.isoformat()}, scopes={self.scopes!r}, username={self.username!r})"

    @property
    def authorization_header(self) -> str:
        return f"{self.scheme} {self.access_token}"


def _accounts(handle: int) -> List[Account]:
    return [Account(*(_text(getattr(_lib, f"tokencache_accounts_{field}")(handle, index))
                      for field in ("home_account_id", "environment", "username", "local_account_id", "tenant_id")))
            for index in range(_lib.tokencache_accounts_count(handle))]


def _token(secret: ctypes.c_void_p, info: ctypes.c_void_p) -> Token:
    try:
        access_token = _text(ctypes.string_at(secret.value)) if secret.value else ""
        return Token(access_token=access_token,
                     expires_on=datetime.fromtimestamp(_lib.tokencache_token_info_expires_on(info), timezone.utc),
                     scheme=_text(_lib.tokencache_token_info_scheme(info)),
                     scopes=tuple(_text(_lib.tokencache_token_info_scopes(info)).split()),
                     tenant_id=_text(_lib.tokencache_token_info_tenant_id(info)),
                     home_account_id=_text(_lib.tokencache_token_info_home_account_id(info)),
                     username=_text(_lib.tokencache_token_info_username(info)),
                     is_from_cache=bool(_lib.tokencache_token_info_is_from_cache(info)))
    finally:
        _lib.tokencache_secret_free(secret)
        _lib.tokencache_token_info_free(info)


class Watch:
    """A running accounts watch; stop() it (or leave the with block). Closing its store stops it too."""

    def __init__(self, callback):
        self._handle = _Handle(0, "watch")  # its C pointer once started; callbacks hold it while they run
        self._callback = callback
        self._store: Optional["Store"] = None

    def _started(self, pointer: int, store: "Store") -> None:
        self._handle._pointer = pointer
        self._store = store
        with store._watches_lock:
            store._watches.add(self)

    def stop(self) -> None:
        """Returns once the callback is not running and will not run again (in every thread that calls it).
        Raises TokenCacheError from inside the callback."""
        self._handle.release(_lib.tokencache_watch_stop)
        if self._store is not None:
            with self._store._watches_lock:
                self._store._watches.discard(self)

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Store:
    """A sharing group's cache on the backend a policy selects (tokencache_store)."""

    def __init__(self, handle: int):
        self._handle = _Handle(handle, "store")
        self._watches = set()  # C requires them stopped before the store is closed
        self._watches_lock = threading.Lock()

    @classmethod
    def open(cls, group: Optional[str] = None, backend: Backend = Backend.AUTO) -> "Store":
        """Opens a group (None: MSAL's com.microsoft.identity.universalstorage)."""
        handle, error = ctypes.c_void_p(), _Error()
        _check(_lib.tokencache_store_open(_arg(group, "group"), int(backend), ctypes.byref(handle), ctypes.byref(error)), error)
        return cls(handle.value)

    def close(self) -> None:
        """Closes the store once the calls in flight on other threads have returned, after stopping its
        watches; later calls raise ClosedError. Idempotent; raises TokenCacheError from inside a call
        or callback of this store."""
        with self._watches_lock:
            watches = list(self._watches)
        if any(watch._handle.held_here() for watch in watches):  # would wait for itself
            raise TokenCacheError(INVALID_ARGUMENT, "TOKENCACHE_E_INVALID_ARGUMENT",
                                  "Invalid store: cannot be closed from inside one of its watches' callbacks.",
                                  "Close it after the callback has returned, from another thread")
        self._handle.release(_lib.tokencache_store_close, self._stop_watches)

    def _stop_watches(self) -> None:
        with self._watches_lock:
            watches = list(self._watches)
        for watch in watches:
            watch.stop()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def accounts(self, client_id: Optional[str] = None) -> List[Account]:
        """The accounts an app can use silently, or every account of the group (client_id None). With
        set_sso_stores, an app's list goes on with the stores' accounts it could get a token for. On a
        store acquire_token_silent answers through the token agent (TOKENCACHE_AGENT_SOCK), the agent's."""
        with self._handle.use() as store:
            handle, error = ctypes.c_void_p(), _Error()
            _check(_lib.tokencache_store_accounts(store, _arg(client_id, "client_id"), ctypes.byref(handle),
                                                  ctypes.byref(error)), error)
            try:
                return _accounts(handle.value)
            finally:
                _lib.tokencache_accounts_free(handle.value)

    def find_access_token(self, client_id: str, account: str, scopes: Union[str, List[str]],
                          authority: Optional[str] = None) -> Optional[Token]:
        """A cached, unexpired access token (no network), or None when there is none (or no such account).
        Raises AmbiguousAccountError when authority is None and the account is at hosts of two clouds."""
        with self._handle.use() as store:
            secret, info, error = ctypes.c_void_p(), ctypes.c_void_p(), _Error()
            status = _lib.tokencache_store_find_access_token(store, _arg(client_id, "client_id"), _arg(account, "account"),
                                                             _scopes(scopes), _arg(authority, "authority"), ctypes.byref(secret),
                                                             ctypes.byref(info), ctypes.byref(error))
            if status == NOT_FOUND:  # no such account, or no usable token for it
                return None
            _check(status, error)
            return _token(secret, info)

    def acquire_token_silent(self, client_id: str, authority: Optional[str], account: Optional[str],
                             scopes: Union[str, List[str]], force_refresh: bool = False,
                             claims_challenge: Optional[str] = None) -> Token:
        """A cached token, or one refreshed at the authority and saved. Raises INTERACTION_REQUIRED when the
        user must sign in. The account and token are chosen as the CLI's `token` and every other front end
        chooses them: account None is the client's only account; authority None takes the home tenant's
        cached token (else the only tenant's with one) and refreshes it on the account's own host. Errors carry the same reasons
        (no_account, several_accounts, account_in_several_clouds, tokens_in_several_tenants, no_usable_token).
        With TOKENCACHE_AGENT_SOCK set, a store opened with the default group and
        Backend.AUTO asks that token agent instead (docs/AGENT.md); BACKEND_UNAVAILABLE when it cannot be reached.
        claims_challenge (decoded JSON, e.g. claims_from_www_authenticate of a resource's 401), as MSAL Python's:
        the cached token is skipped and the refresh carries the claims, merged with set_client_capabilities';
        a refusal that asks for more claims raises INTERACTION_REQUIRED with them in the error's `claims`."""
        if claims_challenge is not None:
            return self._acquire_token_with_claims(client_id, authority, account, scopes, claims_challenge)
        with self._handle.use() as store:
            secret, info, error = ctypes.c_void_p(), ctypes.c_void_p(), _Error()
            _check(_lib.tokencache_acquire_token_silent(store, _arg(client_id, "client_id"), _arg(authority, "authority"),
                                                        _arg(account, "account"), _scopes(scopes), 1 if force_refresh else 0,
                                                        ctypes.byref(secret), ctypes.byref(info), ctypes.byref(error)), error)
            return _token(secret, info)

    def _acquire_token_with_claims(self, client_id: str, authority: Optional[str], account: Optional[str],
                                   scopes: Union[str, List[str]], claims: str) -> Token:
        with self._handle.use() as store:
            secret, info, required, error = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), _Error()
            status = _lib.tokencache_acquire_token_with_claims(
                store, _arg(client_id, "client_id"), _arg(authority, "authority"), _arg(account, "account"), _scopes(scopes),
                _arg(claims, "claims_challenge"), ctypes.byref(secret), ctypes.byref(info), ctypes.byref(required), ctypes.byref(error))
            if status != 0:
                failure = _error(status, error)
                if required.value:
                    failure.claims = ctypes.string_at(required.value).decode("utf-8")
                    _lib.tokencache_string_free(required.value)
                raise failure
            return _token(secret, info)

    def set_client_capabilities(self, capabilities: Union[None, str, List[str]]) -> None:
        """Declares client capabilities, as MSAL Python's client_capabilities: ["cp1"] says the app handles
        claims challenges (continuous access evaluation). Every token request of the store then sends them merged
        into `claims` ({"access_token":{"xms_cc":{"values":["cp1"]}}}). None or [] turns it off. Raises
        INVALID_ARGUMENT for a malformed name."""
        with self._handle.use() as store:
            text = " ".join(capabilities) if isinstance(capabilities, (list, tuple)) else (capabilities or "")
            error = _Error()
            _check(_lib.tokencache_store_set_client_capabilities(store, text.encode("utf-8"), ctypes.byref(error)), error)

    _BROKER_USES = {"never": 0, "when-available": 1, "always": 2}

    def set_broker(self, use: str) -> None:
        """When silent requests ask the identity broker on the session bus (Microsoft's, on an enrolled
        machine) instead of the cache: "never" (the default), "when-available" (else the cache) or "always"
        (else BACKEND_UNAVAILABLE, reason broker_unavailable). `tokencache broker` itself is never asked.
        Raises INVALID_ARGUMENT for another value."""
        if use not in self._BROKER_USES:
            raise ValueError("use must be one of: never, when-available, always")
        with self._handle.use() as store:
            error = _Error()
            _check(_lib.tokencache_store_set_broker(store, self._BROKER_USES[use], ctypes.byref(error)), error)

    def account_photo(self, client_id: str, authority: str, account: Optional[str] = None,
                      refresh: bool = False) -> Optional[Photo]:
        """The account's Microsoft Graph photo (bytes and MIME type), or None when it has none (Graph's 404).
        Fetched with a silent User.Read token of client_id at authority from the account's cloud's Graph
        (or TOKENCACHE_GRAPH_ENDPOINT), cached with the account for a day; refresh asks Graph again.
        The account is chosen as acquire_token_silent chooses it. Errors carry the reasons no_graph,
        graph_unreachable, graph_refused, photo_not_an_image and photo_too_large."""
        with self._handle.use() as store:
            data, length, content_type, error = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p(), _Error()
            _check(_lib.tokencache_account_photo(store, _arg(client_id, "client_id"), _arg(authority, "authority"),
                                                 _arg(account, "account"), 1 if refresh else 0, ctypes.byref(data),
                                                 ctypes.byref(length), ctypes.byref(content_type), ctypes.byref(error)), error)
            if not data.value:
                return None
            try:
                return Photo(ctypes.string_at(data.value, length.value), ctypes.string_at(content_type.value).decode())
            finally:
                _lib.tokencache_photo_free(data.value)
                _lib.tokencache_string_free(content_type.value)

    def set_sso_stores(self, names: Union[None, str, List[str]]) -> None:
        """Single sign-on with other tools' MSAL caches (off by default): accounts(client_id) then lists, and
        acquire_token_silent may use, the accounts and refresh tokens of these stores, named as `tokencache stores` shows them ("azure-cli").
        None or [] turns it off. Raises INVALID_ARGUMENT for an unknown name."""
        with self._handle.use() as store:
            text = " ".join(names) if isinstance(names, (list, tuple)) else (names or "")
            error = _Error()
            _check(_lib.tokencache_store_set_sso_stores(store, text.encode("utf-8"), ctypes.byref(error)), error)

    def save_response(self, client_id: str, authority: str, scopes: Union[str, List[str]],
                      response_json: Union[str, bytes]) -> Token:
        """Stores a token endpoint response body; returns the saved token's description (access_token empty)."""
        with self._handle.use() as store:
            body = response_json.encode("utf-8") if isinstance(response_json, str) else bytes(response_json)
            info, error = ctypes.c_void_p(), _Error()
            _check(_lib.tokencache_store_save_response(store, _arg(client_id, "client_id"), _arg(authority, "authority"),
                                                       _scopes(scopes), body, len(body), ctypes.byref(info), ctypes.byref(error)),
                   error)
            return _token(ctypes.c_void_p(), info)

    def sign_in_device_code(self, client_id: str, authority: str, scopes: Union[str, List[str]],
                            on_code: Callable[[DeviceCode], None], timeout_seconds: int = 0) -> Token:
        """Signs a user in with a code entered on another device (RFC 8628) and saves the sign-in for the group.
        on_code(DeviceCode) is called once, on this thread, with what to show the user; the call then blocks until
        the user has finished (timeout_seconds 0: until the code expires). Raises ACCESS_DENIED, TIMED_OUT,
        UNSUPPORTED_FLOW, ... An exception raised by on_code is raised again once the sign-in has ended."""
        with self._handle.use() as store:
            if not callable(on_code):
                raise TypeError("on_code must be callable")
            raised = []

            def trampoline(user_code, verification_uri, message, _user_data):
                try:
                    on_code(DeviceCode(_text(user_code), _text(verification_uri), _text(message)))
                except BaseException as exception:  # an exception must not unwind into C
                    raised.append(exception)
            c_callback = _DEVICE_CODE(trampoline)
            secret, info, error = ctypes.c_void_p(), ctypes.c_void_p(), _Error()
            status = _lib.tokencache_sign_in_device_code(store, _arg(client_id, "client_id"), _arg(authority, "authority"),
                                                         _scopes(scopes), c_callback, None, timeout_seconds, ctypes.byref(secret),
                                                         ctypes.byref(info), ctypes.byref(error))
            if status == 0:
                token = _token(secret, info)
            if raised:
                raise raised[0]
            _check(status, error)
            return token

    def sign_in_browser(self, client_id: str, authority: str, scopes: Union[str, List[str]],
                        login_hint: Optional[str] = None, timeout_seconds: int = 0) -> Token:
        """Signs a user in with the system browser (authorization code with PKCE, redirect to http://localhost:<port>,
        which must be registered for the app) and saves the sign-in for the group. Blocks until the user has finished
        (timeout_seconds 0: 300). Raises BROWSER_UNAVAILABLE at once where no browser can be opened (use
        sign_in_device_code), CANCELLED, ACCESS_DENIED, TIMED_OUT, ..."""
        with self._handle.use() as store:
            secret, info, error = ctypes.c_void_p(), ctypes.c_void_p(), _Error()
            _check(_lib.tokencache_sign_in_browser(store, _arg(client_id, "client_id"), _arg(authority, "authority"),
                                                   _scopes(scopes), _arg(login_hint, "login_hint"), timeout_seconds,
                                                   ctypes.byref(secret), ctypes.byref(info), ctypes.byref(error)), error)
            return _token(secret, info)

    def _native(self, function, arguments, prompt: Callable[[NativePrompt, str], Optional[str]]) -> Token:
        """Runs a tokencache_native_* flow, asking `prompt` (on this thread) for codes, passwords and attributes."""
        if not callable(prompt):
            raise TypeError("prompt must be callable")
        raised = []

        def trampoline(what, detail, answer, size, _user_data):
            try:
                value = prompt(NativePrompt(what), _text(detail))
                if value is None:
                    return 1  # cancelled
                data = value.encode("utf-8")
                if len(data) >= size:
                    return 1
                ctypes.memmove(answer, data + b"\0", len(data) + 1)
                return 0
            except BaseException as exception:  # an exception must not unwind into C
                raised.append(exception)
                return 1
        c_prompt = _NATIVE_PROMPT(trampoline)
        with self._handle.use() as store:  # close() waits for the flow, prompts included
            secret, info, error = ctypes.c_void_p(), ctypes.c_void_p(), _Error()
            status = function(store, *arguments, c_prompt, None, ctypes.byref(secret), ctypes.byref(info), ctypes.byref(error))
            if raised:
                raise raised[0]
            _check(status, error)
            return _token(secret, info)

    def native_sign_in(self, client_id: str, authority: str, scopes: Union[str, List[str]], username: str,
                       prompt: Callable[[NativePrompt, str], Optional[str]], password: Optional[str] = None) -> Token:
        """Signs a user in with Entra External ID's native authentication (an email code or a password) and saves the
        sign-in for the group. prompt(what, detail) returns the code (NativePrompt.CODE, detail the masked address) or
        the password (PASSWORD), or None to cancel. Raises BROWSER_REQUIRED (use sign_in_browser), USER_NOT_FOUND,
        INVALID_CREDENTIALS, INVALID_CODE (three wrong codes), EXPIRED, CANCELLED, ..."""
        return self._native(_lib.tokencache_native_sign_in, [_arg(client_id, "client_id"), _arg(authority, "authority"),
                            _scopes(scopes), _arg(username, "username"), _arg(password, "password")], prompt)

    def native_sign_up(self, client_id: str, authority: str, scopes: Union[str, List[str]], username: str,
                       prompt: Callable[[NativePrompt, str], Optional[str]], password: Optional[str] = None,
                       attributes: Optional[dict] = None) -> Token:
        """Signs a new user up (password None: an email-code account), then in. Attributes the user flow requires
        beyond `attributes` are asked with NativePrompt.ATTRIBUTE. Raises USER_ALREADY_EXISTS, PASSWORD_POLICY,
        ATTRIBUTE_VALIDATION, BROWSER_REQUIRED, ..."""
        encoded = json.dumps(attributes) if attributes else None
        return self._native(_lib.tokencache_native_sign_up, [_arg(client_id, "client_id"), _arg(authority, "authority"),
                            _scopes(scopes), _arg(username, "username"), _arg(password, "password"),
                            _arg(encoded, "attributes")], prompt)

    def native_reset_password(self, client_id: str, authority: str, scopes: Union[str, List[str]], username: str,
                              new_password: str, prompt: Callable[[NativePrompt, str], Optional[str]]) -> Token:
        """Resets a user's password (the emailed code through prompt), waits for the reset to complete, then signs
        the user in. Raises USER_NOT_FOUND, INVALID_CODE, PASSWORD_POLICY, ..."""
        return self._native(_lib.tokencache_native_reset_password, [_arg(client_id, "client_id"), _arg(authority, "authority"),
                            _scopes(scopes), _arg(username, "username"), _arg(new_password, "new_password")], prompt)

    def sign_out(self, client_id: str, account: str) -> None:
        """Signs one app out of an account; other apps of the group keep it."""
        with self._handle.use() as store:
            error = _Error()
            _check(_lib.tokencache_store_sign_out(store, _arg(client_id, "client_id"), _arg(account, "account"),
                                                  ctypes.byref(error)), error)

    def remove_account(self, account: str) -> int:
        """Removes an account for every app of the group; returns the number of entries removed."""
        with self._handle.use() as store:
            removed, error = ctypes.c_size_t(), _Error()
            _check(_lib.tokencache_store_remove_account(store, _arg(account, "account"), ctypes.byref(removed),
                                                        ctypes.byref(error)), error)
            return removed.value

    def watch_accounts(self, client_id: str, callback: Callable[[Optional[List[Account]], Optional[TokenCacheError]], None],
                       interval_ms: int = 1000) -> Watch:
        """Calls callback(accounts, None) with the app's accounts now and on every change, or (None, error) when a
        read fails; on a library thread, one call at a time."""
        watch = Watch(callback)

        def trampoline(handle, error, _user_data):
            try:
                with watch._handle.use():  # ClosedError once stop() has begun: not delivered
                    if handle:
                        callback(_accounts(handle), None)
                    else:
                        callback(None, _error(error.contents.code, error.contents))
            except ClosedError:
                pass
            except Exception:  # an exception must not unwind into C
                import traceback
                traceback.print_exc()
        watch._c_callback = _ACCOUNTS_CHANGED(trampoline)  # kept alive while the C library may call it
        with self._handle.use() as store:
            handle, error = ctypes.c_void_p(), _Error()
            _check(_lib.tokencache_store_watch_accounts(store, _arg(client_id, "client_id"), interval_ms, watch._c_callback,
                                                        None, ctypes.byref(handle), ctypes.byref(error)), error)
            watch._started(handle.value, self)
            return watch


def claims_from_www_authenticate(header: str) -> Optional[str]:
    """The claims (decoded JSON) of a resource's claims challenge: its 401 answer's WWW-Authenticate value with
    Bearer error="insufficient_claims" and claims="<base64>"; None when the value has no such challenge. Pass them
    as acquire_token_silent's claims_challenge."""
    claims, error = ctypes.c_void_p(), _Error()
    status = _lib.tokencache_claims_from_www_authenticate(_arg(header, "header"), ctypes.byref(claims), ctypes.byref(error))
    if status == NOT_FOUND:
        return None
    _check(status, error)
    try:
        return ctypes.string_at(claims.value).decode("utf-8")
    finally:
        _lib.tokencache_string_free(claims.value)


def diagnose(group: Optional[str] = None, backend: Backend = Backend.AUTO) -> Tuple[str, bool]:
    """What `tokencache doctor` reports, and whether the backend can work here."""
    report, usable, error = ctypes.c_void_p(), ctypes.c_int(), _Error()
    _check(_lib.tokencache_diagnose(_arg(group, "group"), int(backend), ctypes.byref(report), ctypes.byref(usable),
                                    ctypes.byref(error)), error)
    try:
        return _text(ctypes.string_at(report.value)), bool(usable.value)
    finally:
        _lib.tokencache_string_free(report.value)
