import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A stand-in for login.microsoftonline.com on 127.0.0.1, so the demo can show a real sign-in
/// and refresh over HTTP without a network: it answers OpenID discovery, the device
/// authorization endpoint (the demo's user approves the code at the second poll), and the
/// device-code and refresh-token grants, issuing new (fake) tokens; and native authentication's
/// email-code sign-in (initiate, challenge, `oob` grant) for one customer, as Entra External ID would.
final class LoopbackIdentityProvider: @unchecked Sendable {
    // @unchecked: the dictionaries are only touched under `lock`; the socket is set once.
    private let socket: Int32
    let port: UInt16
    private let lock = NSLock()
    private var refreshTokens: [String: [String: String]] = [:]  // refresh token -> client_info fields
    private var deviceCodes: [String: (user: [String: String], polls: Int)] = [:]
    private var deviceUser: [String: String] = [:]
    private var issued = 0
    private var nativeUser: [String: String] = [:]
    /// The code last "emailed" to the native user, and the continuation token it belongs to.
    private var mailed: (code: String, continuationToken: String)?

    init() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(socket, 8) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        self.socket = socket
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    /// Lets the provider redeem a refresh token for a user.
    func accept(refreshToken: String, uid: String, utid: String, username: String, name: String) {
        lock.withLock { refreshTokens[refreshToken] = ["uid": uid, "utid": utid, "username": username, "name": name] }
    }

    /// The user who will enter the device codes the provider hands out.
    func approveDeviceCodes(as uid: String, utid: String, username: String, name: String) {
        lock.withLock { deviceUser = ["uid": uid, "utid": utid, "username": username, "name": name] }
    }

    /// The customer who signs in natively with an email code.
    func acceptNativeSignIn(as uid: String, utid: String, username: String, name: String) {
        lock.withLock { nativeUser = ["uid": uid, "utid": utid, "username": username, "name": name] }
    }

    /// The code in the native user's mailbox (the demo reads it as the user would).
    var mailedCode: String? { lock.withLock { mailed?.code } }

    var authority: String { "http://127.0.0.1:\(port)/organizations" }

    private func serve() {
        while true {
            let client = Glibc.accept(socket, nil, nil)
            guard client >= 0 else { return }
            handle(client)
            close(client)
        }
    }

    private func handle(_ client: Int32) {
        var request = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(client, &buffer, buffer.count)
            guard count > 0 else { break }
            request.append(contentsOf: buffer[0..<count])
            if let headerEnd = request.range(of: Data("\r\n\r\n".utf8)) {
                let head = String(decoding: request[..<headerEnd.lowerBound], as: UTF8.self)
                let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                if request.count - headerEnd.upperBound >= length { break }
            }
        }
        let text = String(decoding: request, as: UTF8.self)
        let requestLine = text.split(separator: "\r\n").first.map(String.init) ?? ""
        let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined()
        let (status, json) = respond(to: requestLine, body: body)
        let payload = try! JSONSerialization.data(withJSONObject: json)
        let header = "HTTP/1.1 \(status) OK\r\nContent-Type: application/json\r\nContent-Length: \(payload.count)\r\nConnection: close\r\n\r\n"
        let response = Data(header.utf8) + payload
        response.withUnsafeBytes { _ = write(client, $0.baseAddress, $0.count) }
    }

    private func respond(to requestLine: String, body: String) -> (Int, [String: Any]) {
        let base = "http://127.0.0.1:\(port)/organizations"
        if requestLine.hasPrefix("GET ") && requestLine.contains("/.well-known/openid-configuration") {
            return (200, ["issuer": base + "/v2.0", "token_endpoint": base + "/oauth2/v2.0/token",
                          "device_authorization_endpoint": base + "/oauth2/v2.0/devicecode"])
        }
        var form: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
                .map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0) }
            if parts.count == 2 { form[parts[0]] = parts[1] }
        }
        if requestLine.hasPrefix("POST ") && requestLine.contains("/oauth2/v2.0/devicecode") {
            return lock.withLock {
                issued += 1
                let userCode = "DEMO\(1000 + issued)"
                deviceCodes["demo-device-code-\(issued)"] = (deviceUser, 0)
                let verification = "http://127.0.0.1:\(port)/devicelogin"
                return (200, ["device_code": "demo-device-code-\(issued)", "user_code": userCode,
                              "verification_uri": verification, "expires_in": 300, "interval": 1,
                              "message": "To sign in, open \(verification) and enter the code \(userCode) to authenticate."])
            }
        }
        if requestLine.hasPrefix("POST ") && requestLine.contains("/oauth2/v2.0/initiate") {
            return lock.withLock {
                guard form["username"]?.lowercased() == nativeUser["username"] else { return (400, ["error": "user_not_found", "error_codes": [50034]]) }
                return (200, ["continuation_token": "demo-ct-initiate"])
            }
        }
        if requestLine.hasPrefix("POST ") && requestLine.contains("/oauth2/v2.0/challenge") {
            return lock.withLock {
                issued += 1
                let token = "demo-ct-challenge-\(issued)"
                mailed = (String(format: "%06d", Int.random(in: 0..<1_000_000)), token)
                let email = nativeUser["username"] ?? ""
                return (200, ["continuation_token": token, "challenge_type": "oob", "binding_method": "prompt", "challenge_channel": "email",
                              "challenge_target_label": String(email.prefix(1)) + "****@" + (email.split(separator: "@").last.map(String.init) ?? ""),
                              "code_length": 6])
            }
        }
        guard requestLine.hasPrefix("POST ") && requestLine.contains("/oauth2/v2.0/token") else { return (404, ["error": "not_found"]) }
        return lock.withLock {
            let user: [String: String]
            switch form["grant_type"] {
            case "urn:ietf:params:oauth:grant-type:device_code":
                guard let code = form["device_code"], let pending = deviceCodes[code], !pending.user.isEmpty else {
                    return (400, ["error": "expired_token"])
                }
                // The demo's user enters the code while the app polls: pending once, then approved.
                guard pending.polls > 0 else {
                    deviceCodes[code]?.polls += 1
                    return (400, ["error": "authorization_pending"])
                }
                deviceCodes[code] = nil
                user = pending.user
            case "oob":
                guard let mailed, form["continuation_token"] == mailed.continuationToken, form["oob"] == mailed.code else {
                    return (400, ["error": "invalid_grant", "suberror": "invalid_oob_value", "error_codes": [50181]])
                }
                self.mailed = nil
                user = nativeUser
            case "refresh_token":
                guard let token = form["refresh_token"], let known = refreshTokens.removeValue(forKey: token) else {
                    return (400, ["error": "invalid_grant", "error_codes": [70000]])
                }
                user = known
            default:
                return (400, ["error": "unsupported_grant_type"])
            }
            issued += 1
            let newRefreshToken = "demo-refresh-token-rotated-\(issued)"
            refreshTokens[newRefreshToken] = user
            func b64(_ object: [String: String]) -> String {
                (try! JSONSerialization.data(withJSONObject: object, options: .sortedKeys)).base64EncodedString()
                    .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                    .replacingOccurrences(of: "=", with: "")
            }
            let scopes = (form["scope"] ?? "").split(separator: " ")
                .filter { !["openid", "profile", "offline_access"].contains($0) }.joined(separator: " ")
            return (200, [
                "token_type": "Bearer", "expires_in": 3600, "scope": scopes, "foci": "1",
                "access_token": "demo-access-token-from-refresh-\(issued)", "refresh_token": newRefreshToken,
                "client_info": b64(["uid": user["uid"]!, "utid": user["utid"]!]),
                "id_token": b64(["alg": "none"]) + "." + b64(["oid": user["uid"]!, "tid": user["utid"]!, "sub": "demo-sub",
                                                              "preferred_username": user["username"]!, "name": user["name"]!]) + ".sig",
            ])
        }
    }
}
