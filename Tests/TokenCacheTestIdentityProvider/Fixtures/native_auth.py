"""The native authentication API (Entra External ID, API V1) for fake_idp.py: sign-in, sign-up and
self-service password reset on loopback, following /work/shared/NATIVE-AUTH.md.

  POST <authority>/oauth2/v2.0/initiate | challenge        sign-in
  POST <authority>/oauth2/v2.0/token   grant_type oob | password | continuation_token
  POST <authority>/signup/v1.0/start | challenge | continue
  POST <authority>/resetpassword/v1.0/start | challenge | continue | submit | poll_completion
Control (POST /control, merged into fake_idp's):
  {"native_users": {email: {"password": str|null, "uid": str}}}   users (no password = email-OTP user)
  {"native_mailbox": dir}            codes are "mailed" by appending a line to <dir>/<email>
  {"native_token_lifetime": s}       continuation tokens issued from now on live s seconds (default 300)
  {"native_expire_tokens": true}     every continuation token issued so far expires now
  {"native_signup_attributes": [{"name", "type", "required", "options": {"regex"}}]}   the user flow's attributes
  {"native_signup_password": bool}   the sign-up user flow makes email + password accounts (default: true)
  {"native_sspr_polls": n}           poll_completion answers in_progress n times, then succeeded (default 1)
  {"native_fail_next": n}            the next n requests are answered 503 (a server error, never an auth answer)
GET /native/stats: {"requests": [{"path", "challenge_type", "grant_type"}]} (never codes or passwords).
Continuation tokens are bound to client, flow, user and step, and may be sent again within a step.
"""
import json
import os
import re
import secrets
import time
import uuid

users = {}
tokens = {}
settings = {"mailbox": None, "lifetime": 300.0, "signup_attributes": [], "signup_password": True, "sspr_polls": 1,
            "fail_next": 0}
requests = []
PASSWORD_SUBERRORS = ("password_too_weak", "password_too_short", "password_too_long", "password_recently_used",
                      "password_banned", "password_is_invalid")
PATHS = ("/oauth2/v2.0/initiate", "/oauth2/v2.0/challenge", "/signup/v1.0/", "/resetpassword/v1.0/")
NATIVE_GRANTS = ("oob", "password", "continuation_token")


def handles(path, form):
    """Whether a POST is for this API (the token endpoint only for the native grants)."""
    if any(marker in path for marker in PATHS):
        return True
    return path.endswith("/oauth2/v2.0/token") and form.get("grant_type") in NATIVE_GRANTS


def control(command):
    if "native_users" in command:
        for email, record in command["native_users"].items():
            users[email.lower()] = {"password": record.get("password"), "uid": record.get("uid") or "uid-" + uuid.uuid4().hex[:8],
                                    "attributes": {}}
    if "native_mailbox" in command:
        settings["mailbox"] = command["native_mailbox"]
    if "native_token_lifetime" in command:
        settings["lifetime"] = float(command["native_token_lifetime"])
    if command.get("native_expire_tokens"):
        for record in tokens.values():
            record["expires"] = 0
    if "native_signup_attributes" in command:
        settings["signup_attributes"] = command["native_signup_attributes"]
    if "native_signup_password" in command:
        settings["signup_password"] = bool(command["native_signup_password"])
    if "native_fail_next" in command:
        settings["fail_next"] = int(command["native_fail_next"])
    if "native_sspr_polls" in command:
        settings["sspr_polls"] = int(command["native_sspr_polls"])


def stats():
    return {"requests": requests, "users": sorted(users)}


def envelope(error, description, codes, suberror=None, token=None, **extra):
    body = {"error": error, "error_description": description, "error_codes": codes, "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ"),
            "trace_id": str(uuid.uuid4()), "correlation_id": str(uuid.uuid4())}
    if suberror:
        body["suberror"] = suberror
    if token:
        body["continuation_token"] = token
    body.update(extra)
    return 400, body


REDIRECT = (200, {"challenge_type": "redirect"})


def new_token(flow, step, client_id, username, **data):
    token = "ct-" + secrets.token_urlsafe(24)
    tokens[token] = dict(data, flow=flow, step=step, client_id=client_id, username=username.lower(),
                         expires=time.time() + settings["lifetime"])
    return token


def take(form, flow, steps):
    """The continuation token's record when it is bound to this client, flow and one of the steps;
    else the error to answer."""
    record = tokens.get(form.get("continuation_token", ""))
    if record is None or record["client_id"] != form.get("client_id") or record["flow"] != flow or record["step"] not in steps:
        return None, envelope("invalid_grant", "AADSTS55112: the continuation token is not valid for this request.", [55112])
    if time.time() > record["expires"]:
        return None, envelope("expired_token", "AADSTS552003: the continuation token has expired.", [552003])
    if "username" in form and form["username"].lower() != record["username"]:
        return None, envelope("invalid_grant", "AADSTS55112: the continuation token belongs to another user.", [55112])
    return record, None


def mail_code(record):
    """A new code for the flow (the previous one dies), appended to the user's mailbox file."""
    # 73 and 6 digits from 100000: never a test's wrong code (73000001...). Each code is noted in
    # $TOKENCACHE_TEST_ISSUED_SECRETS when set, where check-no-secrets.sh looks for it exactly (a
    # pattern for 8 digits would also match numbers that are no secret).
    code = "73%06d" % (100000 + secrets.randbelow(900000))
    record["flow_state"]["code"] = code
    issued = os.environ.get("TOKENCACHE_TEST_ISSUED_SECRETS")
    if issued:
        with open(issued, "a") as noted:
            noted.write(code + "\n")
    if settings["mailbox"]:
        with open(os.path.join(settings["mailbox"], record["username"]), "a") as mailbox:
            mailbox.write(code + "\n")


def masked(email):
    name, _, domain = email.partition("@")
    return name[:1] + "****@" + domain


def code_challenge(record, flow, client_id):
    mail_code(record)
    token = new_token(flow, "oob", client_id, record["username"], flow_state=record["flow_state"])
    return 200, {"continuation_token": token, "challenge_type": "oob", "binding_method": "prompt", "challenge_channel": "email",
                 "challenge_target_label": masked(record["username"]), "code_length": 8, "interval": 300}


def password_problem(password, old=None):
    if len(password) < 8:
        return "password_too_short"
    if len(password) > 256:
        return "password_too_long"
    if password.lower() in ("password1", "passw0rd", "12345678a"):
        return "password_banned"
    if old is not None and password == old:
        return "password_recently_used"
    if not (re.search(r"[A-Za-z]", password) and re.search(r"[0-9]", password)):
        return "password_too_weak"
    return None


def policy_error(suberror, token=None):
    return envelope("invalid_grant", "AADSTS399246: the new password does not meet the policy (%s)." % suberror, [399246],
                    suberror=suberror, token=token)


def invalid_attributes(attributes):
    """Names of submitted attributes that fail the user flow's regex."""
    bad = []
    for spec in settings["signup_attributes"]:
        regex = (spec.get("options") or {}).get("regex")
        value = attributes.get(spec["name"])
        if value is not None and regex and not re.fullmatch(regex, str(value)):
            bad.append(spec["name"])
    return bad


def parse_attributes(text):
    try:
        value = json.loads(text or "{}")
        return value if isinstance(value, dict) else None
    except ValueError:
        return None


def handle(path, form, issue, tenant):
    """Answers one request: (status, body). `issue(client_id, scope, username, tenant, client_info, user)`
    gives the token response of fake_idp.py."""
    requests.append({"path": path.split("?")[0], "challenge_type": form.get("challenge_type"), "grant_type": form.get("grant_type"),
                     "capabilities": form.get("capabilities"), "claims": form.get("claims")})
    if settings["fail_next"] > 0:
        settings["fail_next"] -= 1
        return 503, {"error": "temporarily_unavailable", "error_codes": [50034]}  # an auth-looking body MSAL must not act on
    client_id = form.get("client_id")
    types = (form.get("challenge_type") or "").split()
    if "challenge_type" in form and "redirect" not in types:
        return envelope("invalid_request", "AADSTS55102: challenge_type must include redirect.", [55102])
    endpoint = path.split("?")[0]
    if endpoint.endswith("/oauth2/v2.0/initiate"):
        return sign_in_initiate(form, types)
    if endpoint.endswith("/oauth2/v2.0/challenge"):
        return sign_in_challenge(form, types)
    if endpoint.endswith("/oauth2/v2.0/token"):
        return token(form, issue, tenant)
    step = endpoint.rsplit("/", 1)[-1]
    if "/signup/v1.0/" in endpoint:
        return {"start": sign_up_start, "challenge": sign_up_challenge, "continue": sign_up_continue}.get(step, not_found)(form, types)
    return {"start": reset_start, "challenge": reset_challenge, "continue": reset_continue, "submit": reset_submit,
            "poll_completion": reset_poll}.get(step, not_found)(form, types)


def not_found(form, types):
    return 404, {"error": "not_found"}


# --- Sign-in ---

def method_of(user):
    return "password" if user["password"] else "oob"


def sign_in_initiate(form, types):
    username = (form.get("username") or "").lower()
    user = users.get(username)
    if user is None:
        return envelope("user_not_found", "AADSTS50034: the user account does not exist.", [50034])
    if method_of(user) not in types:
        return REDIRECT
    return 200, {"continuation_token": new_token("signin", "challenge", form.get("client_id"), username, flow_state={})}


def sign_in_challenge(form, types):
    record, error = take(form, "signin", ("challenge", "oob"))
    if error:
        return error
    user = users[record["username"]]
    if method_of(user) not in types:
        return REDIRECT
    if method_of(user) == "password":
        return 200, {"continuation_token": new_token("signin", "password", form.get("client_id"), record["username"],
                                                     flow_state=record["flow_state"]), "challenge_type": "password"}
    return code_challenge(record, "signin", form.get("client_id"))


def token(form, issue, tenant):
    grant = form.get("grant_type")
    steps = {"oob": ("oob",), "password": ("password",), "continuation_token": ("signin",)}[grant]
    known = tokens.get(form.get("continuation_token", ""))
    flow = "signin" if grant != "continuation_token" else known["flow"] if known and known["flow"] != "signin" else "signup"
    record, error = take(form, flow, steps)
    if error:
        return error
    user = users[record["username"]]
    if grant == "oob" and form.get("oob") != record["flow_state"].get("code"):
        return envelope("invalid_grant", "AADSTS50181: the one-time code is wrong or was replaced.", [50181],
                        suberror="invalid_oob_value")
    if grant == "password" and form.get("password") != user["password"]:
        return envelope("invalid_grant", "AADSTS50126: invalid username or password.", [50126])
    if grant == "continuation_token" and "username" not in form:
        return envelope("invalid_request", "AADSTS900144: username is required.", [900144])
    for key in [key for key, value in tokens.items() if value["flow_state"] is record["flow_state"]]:
        del tokens[key]  # the flow is done
    return 200, issue(form.get("client_id"), form.get("scope", ""), record["username"], tenant,
                      form.get("client_info") in ("1", "true"), {"uid": user["uid"], "utid": tenant})


# --- Sign-up ---

def sign_up_start(form, types):
    username = (form.get("username") or "").lower()
    if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", username):
        return envelope("invalid_request", "AADSTS90100: username is not an email address.", [90100], suberror="invalid_username")
    if username in users:
        return envelope("user_already_exists", "AADSTS1003037: the user already exists.", [1003037])
    if "oob" not in types or (settings["signup_password"] and "password" not in types):
        return REDIRECT
    attributes = parse_attributes(form.get("attributes"))
    if attributes is None:
        return envelope("invalid_request", "AADSTS90100: attributes is not a JSON object.", [90100])
    password = form.get("password")
    if password is not None and settings["signup_password"]:
        problem = password_problem(password)
        if problem:
            return policy_error(problem)
    bad = invalid_attributes(attributes)
    if bad:
        return envelope("invalid_grant", "AADSTS55107: attribute validation failed.", [55107], suberror="attribute_validation_failed",
                        invalid_attributes=[{"name": name} for name in bad])
    state = {"password": password if settings["signup_password"] else None, "attributes": attributes, "verified": False}
    return 200, {"continuation_token": new_token("signup", "challenge", form.get("client_id"), username, flow_state=state)}


def sign_up_challenge(form, types):
    record, error = take(form, "signup", ("challenge", "oob"))
    if error:
        return error
    state = record["flow_state"]
    if not state["verified"]:
        if "oob" not in types:
            return REDIRECT
        return code_challenge(record, "signup", form.get("client_id"))
    if "password" not in types:
        return REDIRECT
    return 200, {"continuation_token": new_token("signup", "password", form.get("client_id"), record["username"], flow_state=state),
                 "challenge_type": "password"}


def sign_up_next(record, client_id):
    """After a step: the credential, then the attributes the user flow requires, then the account."""
    state = record["flow_state"]
    if settings["signup_password"] and not state["password"]:
        return envelope("credential_required", "AADSTS55103: a password is required.", [55103],
                        token=new_token("signup", "challenge", client_id, record["username"], flow_state=state))
    missing = [spec for spec in settings["signup_attributes"] if spec.get("required") and spec["name"] not in state["attributes"]]
    if missing:
        return envelope("attributes_required", "AADSTS55106: user attributes are required.", [55106],
                        token=new_token("signup", "attributes", client_id, record["username"], flow_state=state),
                        required_attributes=missing)
    if record["username"] in users:
        return envelope("user_already_exists", "AADSTS1003037: the user already exists.", [1003037])
    users[record["username"]] = {"password": state["password"], "uid": "uid-" + uuid.uuid4().hex[:8], "attributes": state["attributes"]}
    return 200, {"continuation_token": new_token("signup", "signin", client_id, record["username"], flow_state=state)}


def sign_up_continue(form, types):
    grant = form.get("grant_type")
    step = {"oob": "oob", "password": "password", "attributes": "attributes"}.get(grant)
    if step is None:
        return envelope("unsupported_grant_type", "AADSTS70003: unsupported grant_type.", [70003])
    record, error = take(form, "signup", (step,))
    if error:
        return error
    state = record["flow_state"]
    if grant == "oob":
        if form.get("oob") != state.get("code"):
            return envelope("invalid_grant", "AADSTS50181: the one-time code is wrong or was replaced.", [50181],
                            suberror="invalid_oob_value")
        state["verified"] = True
    elif grant == "password":
        problem = password_problem(form.get("password") or "")
        if problem:
            return policy_error(problem)
        state["password"] = form["password"]
    else:
        attributes = parse_attributes(form.get("attributes"))
        if attributes is None:
            return envelope("invalid_request", "AADSTS90100: attributes is not a JSON object.", [90100])
        bad = invalid_attributes(attributes)
        if bad:
            return envelope("invalid_grant", "AADSTS55107: attribute validation failed.", [55107], suberror="attribute_validation_failed",
                            invalid_attributes=[{"name": name} for name in bad])
        state["attributes"].update(attributes)
    return sign_up_next(record, form.get("client_id"))


# --- Self-service password reset ---

def reset_start(form, types):
    username = (form.get("username") or "").lower()
    user = users.get(username)
    if user is None:
        return envelope("user_not_found", "AADSTS50034: the user account does not exist.", [50034])
    if "oob" not in types:
        return REDIRECT
    if not user["password"]:
        return envelope("invalid_request", "AADSTS500222: the user has no password to reset.", [500222])
    return 200, {"continuation_token": new_token("resetpassword", "challenge", form.get("client_id"), username, flow_state={})}


def reset_challenge(form, types):
    record, error = take(form, "resetpassword", ("challenge", "oob"))
    if error:
        return error
    return code_challenge(record, "resetpassword", form.get("client_id"))


def reset_continue(form, types):
    record, error = take(form, "resetpassword", ("oob",))
    if error:
        return error
    if form.get("grant_type") != "oob" or form.get("oob") != record["flow_state"].get("code"):
        return envelope("invalid_grant", "AADSTS50181: the one-time code is wrong or was replaced.", [50181],
                        suberror="invalid_oob_value")
    return 200, {"continuation_token": new_token("resetpassword", "submit", form.get("client_id"), record["username"],
                                                 flow_state=record["flow_state"]), "expires_in": 600}


def reset_submit(form, types):
    record, error = take(form, "resetpassword", ("submit",))
    if error:
        return error
    password = form.get("new_password") or ""
    problem = password_problem(password, users[record["username"]]["password"])
    if problem:
        return policy_error(problem)
    record["flow_state"].update(new_password=password, polls=0)
    return 200, {"continuation_token": new_token("resetpassword", "poll", form.get("client_id"), record["username"],
                                                 flow_state=record["flow_state"]), "poll_interval": 1}


def reset_poll(form, types):
    record, error = take(form, "resetpassword", ("poll",))
    if error:
        return error
    state = record["flow_state"]
    state["polls"] += 1
    if state["polls"] <= settings["sspr_polls"]:
        return 200, {"status": "in_progress" if state["polls"] > 1 else "not_started"}
    users[record["username"]]["password"] = state["new_password"]
    return 200, {"status": "succeeded", "continuation_token": new_token("resetpassword", "signin", form.get("client_id"),
                                                                         record["username"], flow_state=state)}
