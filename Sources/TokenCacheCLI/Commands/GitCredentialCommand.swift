import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// `tokencache git-credential`: a git credential helper (gitcredentials(7)) over the same token
/// request as `tokencache token` (``TokenEngine``): this command only translates git's
/// key=value protocol into a ``TokenRequest`` and the result back.
struct GitCredentialCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "A git credential helper: Azure Repos (and other Entra-protected git hosts) get access tokens from the cache.",
        discussion: """
        git runs it as `git-credential-tokencache get|store|erase` (installed next to tokencache) \
        once `credential.helper` names it; `tokencache git-credential --configure` writes that for \
        Azure Repos (dev.azure.com, *.visualstudio.com) in your global git config and prints what \
        it wrote.

        get: for a known host (dev.azure.com, *.visualstudio.com, and each --host), a token for \
        Azure DevOps (\(azureDevOpsScope)) or --scopes, exactly as `tokencache token` gets it: \
        cached, or refreshed silently (through the token agent when TOKENCACHE_AGENT_SOCK is set); \
        answered as username and password (Azure Repos takes an access token as a Basic password), \
        or as authtype=Bearer and credential where git announces capability[]=authtype. The client \
        is --client, TOKENCACHE_CLIENT_ID or the config file's "client", else Azure CLI's \
        (\(ToolTokenOptions.azureCLIClient), which Azure DevOps accepts); the account and authority come as `token` \
        takes them. With no account and a terminal (/dev/tty), it signs in with a device code \
        shown there; with none it fails at once with one line git shows. For any other host it \
        prints nothing, so git asks its next helper.

        erase: git calls it when the server refused the token: when that token is the cached one, \
        it is replaced by a refreshed one, so the next get hands out a new token; the account and \
        its refresh token stay. store: nothing to store (exit 0).

        Examples:
          tokencache git-credential --configure
          git config --global credential.https://git.example.com.helper \\
            "tokencache --host git.example.com --scopes api://git/.default"
        """)

    /// Azure DevOps' resource, as Git Credential Manager and `az` ask for it.
    static let azureDevOpsScope = "499b84ac-1321-427f-aa17-267ca6975798/.default"

    @Argument(help: ArgumentHelp("What git asks: get, store or erase.", valueName: "operation"))
    var operation: String?

    @Option(help: ArgumentHelp("Another host to answer for (host or host:port; *.domain for its subdomains), with --scopes naming its resource; over plain http only on loopback. Repeatable.", valueName: "host"))
    var host: [String] = []

    @Flag(help: "Write git's configuration for Azure Repos (and each --host) in your global git config, and print it.")
    var configure = false

    @OptionGroup var options: ToolTokenOptions

    func validate() throws {
        if configure {
            if operation != nil { throw ValidationError("--configure takes no operation.") }
        } else if operation == nil {
            throw ValidationError("Name the operation git asks for: get, store or erase (or pass --configure).")
        } else if !["get", "store", "erase"].contains(operation!) {
            throw ValidationError("Unknown operation '\(operation!)': git asks for get, store or erase.")
        }
        if let bad = host.first(where: { !Self.isHostPattern($0) }) {
            throw ValidationError("--host '\(bad)' is not a host: give host or host:port (letters, digits, '.', '-'; *.domain for its subdomains).")
        }
        // An Azure DevOps token is for Azure Repos only: another host names its own resource.
        if !host.isEmpty && options.scopes.isEmpty {
            throw ValidationError("--host needs --scopes: the token for \(host.joined(separator: ", ")) is for that host's resource (an Azure DevOps token is only for Azure Repos).")
        }
    }

    /// host, host:port or *.domain (two labels at least), in the letters DNS allows.
    static func isHostPattern(_ pattern: String) -> Bool {
        let name = pattern.hasPrefix("*.") ? String(pattern.dropFirst(2)) : pattern
        let parts = name.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let hostName = parts.first, !hostName.isEmpty,
              hostName.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }),
              parts.count == 1 || UInt16(parts[1]) != nil else { return false }
        return !pattern.hasPrefix("*.") || hostName.split(separator: ".").count >= 2
    }

    /// Whether `host` (host or host:port) is this machine's loopback: the only place a token may go over plain http.
    static func isLoopback(_ host: String) -> Bool {
        let name = host.hasPrefix("[") ? String(host.dropFirst().prefix { $0 != "]" }) : String(host.prefix { $0 != ":" })
        return name == "localhost" || name == "::1" || name.hasPrefix("127.")
    }

    func run() throws {
        if configure { return try writeConfiguration() }
        // git always writes its request and closes the pipe: read it all before anything else.
        let request = GitCredentialRequest(StandardIO.readAll(from: STDIN_FILENO, limit: 1 << 20) ?? Data())
        guard operation != "store", let host = request["host"], isKnown(host: host, protocol: request["protocol"]) else { return }
        // One line: git shows the helper's stderr as it is.
        try ToolTokenOptions.reportingOnOneLine {
            if operation == "get" { try get(request) } else { try erase(request) }
        }
    }

    /// Whether `host` (as git sends it, with its port) is one this helper answers for.
    func isKnown(host: String, protocol scheme: String?) -> Bool {
        let name = host.lowercased()
        if host.contains(where: { $0 == "/" || $0.isWhitespace }) { return false }
        let configured = self.host.map { $0.lowercased() }
        if configured.contains(where: { pattern in
            pattern.hasPrefix("*.") ? name.hasSuffix(pattern.dropFirst(1)) : name == pattern
        }) { return scheme == "https" || (scheme == "http" && Self.isLoopback(name)) }
        guard scheme == "https" else { return false }
        return name == "dev.azure.com" || name.hasSuffix(".visualstudio.com")
    }

    private func get(_ git: GitCredentialRequest) throws {
        let result = try options.token(defaultScope: Self.azureDevOpsScope, signIn: true, tool: "git")
        guard !result.accessToken.contains(where: { $0.isNewline || $0 == "\0" }) else {
            throw CLIError.failed("The access token holds a line break, which git's protocol cannot carry.")
        }
        var lines: [String] = []
        if git.values("capability[]").contains("authtype") {
            lines += ["capability[]=authtype", "authtype=Bearer", "credential=\(result.accessToken)"]
        } else {
            let username = git["username"] ?? result.account?.username ?? "tokencache"
            lines += ["username=\(username)", "password=\(result.accessToken)"]
        }
        // git 2.41 and later use a credential no longer than this (older ones ignore the line).
        lines.append("password_expiry_utc=\(Int(result.expiresOn.timeIntervalSince1970))")
        StandardIO.write(Data((lines.joined(separator: "\n") + "\n").utf8), to: STDOUT_FILENO)
    }

    /// git refused the token: when it is the cached one, a refresh replaces it.
    private func erase(_ git: GitCredentialRequest) throws {
        guard let refused = git["credential"] ?? git["password"], !refused.isEmpty else { return }
        try options.replace(refused: refused, defaultScope: Self.azureDevOpsScope)
    }

    /// `--configure`: `git config --global` lines for Azure Repos and each --host.
    private func writeConfiguration() throws {
        try reportingErrors {
            var settings: [(String, String)] = [
                ("credential.https://dev.azure.com.helper", "tokencache"),
                ("credential.https://dev.azure.com.useHttpPath", "true"),
                ("credential.https://*.visualstudio.com.helper", "tokencache"),
            ]
            // The options that choose the token go with the host; quoted, as git runs the value with the shell.
            let chosen = [("--scopes", options.scopes.joined(separator: " ")), ("--client", options.client?.value ?? ""),
                          ("--authority", options.authority ?? ""), ("--account", options.account ?? "")]
                .filter { !$0.1.isEmpty }.map { " \($0.0) \(Self.shellQuoted($0.1))" }.joined()
            for host in host {
                settings.append(("credential.https://\(host).helper", "tokencache --host \(Self.shellQuoted(host))" + chosen))
            }
            for (key, value) in settings {
                guard key.hasSuffix(".helper") else {
                    try Self.git(["config", "--global", "--replace-all", key, value])
                    StandardIO.write(Data("git config --global \(key) \"\(value)\"\n".utf8), to: STDOUT_FILENO)
                    continue
                }
                // An empty helper first empties git's list for these URLs (gitcredentials(7)): a
                // `credential.helper = store` or `cache` set for every host is then neither asked
                // first nor handed the token to keep in plain text after a successful fetch.
                try Self.git(["config", "--global", "--replace-all", key, ""])
                try Self.git(["config", "--global", "--add", key, value])
                StandardIO.write(Data("git config --global \(key) \"\"\ngit config --global --add \(key) \"\(value)\"\n".utf8),
                                 to: STDOUT_FILENO)
            }
        }
    }

    static func shellQuoted(_ text: String) -> String { "'" + text.replacing("'", with: #"'\''"#) + "'" }

    /// Runs git (found on PATH) and waits for it.
    private static func git(_ arguments: [String]) throws {
        let result: (status: Int32, output: Data)
        do throws(Subprocess.SpawnFailure) { result = try Subprocess.run(["git"] + arguments) } catch {
            throw CLIError.failed("Could not run git: \(error.reason).", hint: "Install git")
        }
        guard result.status == 0 else { throw CLIError.failed("git \(arguments.joined(separator: " ")) failed (status \(result.status)).") }
    }
}

/// git's credential description: key=value lines until a blank line or the end (gitcredentials(7)).
struct GitCredentialRequest {
    private var pairs: [(key: String, value: String)] = []

    init(_ data: Data) {
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty { break }
            guard let equals = line.firstIndex(of: "=") else { continue }
            pairs.append((String(line[..<equals]), String(line[line.index(after: equals)...])))
        }
    }

    /// The last value of `key` (git's rule for a repeated single-valued key).
    subscript(key: String) -> String? { pairs.last { $0.key == key }?.value }

    /// Every value of a multi-valued key (`capability[]`).
    func values(_ key: String) -> [String] { pairs.filter { $0.key == key }.map(\.value) }
}
