import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// `tokencache kubectl-credential`: a client-go exec credential plugin (#61 item 2) over the same
/// token request as `tokencache token`: it reads `KUBERNETES_EXEC_INFO` and answers an
/// `ExecCredential` in the same apiVersion.
struct KubectlCredentialCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kubectl-credential",
        abstract: "A kubectl exec credential plugin: AKS (and other Entra-protected clusters) get access tokens from the cache.",
        discussion: """
        kubectl (client-go) runs it from a kubeconfig user's `exec` stanza; \
        `tokencache kubectl-credential --convert-kubeconfig` writes that stanza for the current \
        context's user (or --context's), keeping a backup of the file, as `kubelogin \
        convert-kubeconfig` does.

        It reads KUBERNETES_EXEC_INFO (apiVersion client.authentication.k8s.io/v1 or v1beta1) and \
        prints an ExecCredential of the same apiVersion with status.token and \
        status.expirationTimestamp (RFC 3339), for AKS (\(aksScope)) or --scopes, got exactly as \
        `tokencache token` gets it: cached, or refreshed silently (through the token agent when \
        TOKENCACHE_AGENT_SOCK is set). With no account it signs in with a device code on the \
        terminal only when kubectl says it is interactive (spec.interactive); otherwise it fails \
        with one line kubectl shows.

        Examples:
          tokencache kubectl-credential --convert-kubeconfig
          tokencache kubectl-credential --convert-kubeconfig \\
              --kubeconfig ~/.kube/aks --context prod
        """)

    /// AKS's server application (its AAD integration), as kubelogin asks for it.
    static let aksScope = "6dae42f8-4368-4678-94ff-3960e28e3630/.default"
    static let apiVersions = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]

    @Flag(help: "Rewrite a kubeconfig's user to run this plugin (a backup of the file is kept next to it).")
    var convertKubeconfig = false

    @Option(help: ArgumentHelp("With --convert-kubeconfig: the kubeconfig; default the first file of $KUBECONFIG, else ~/.kube/config.", valueName: "path"),
            completion: .file())
    var kubeconfig: String?

    @Option(help: ArgumentHelp("With --convert-kubeconfig: the context whose user is rewritten; default the current context.", valueName: "name"))
    var context: String?

    @OptionGroup var options: ToolTokenOptions

    func validate() throws {
        if !convertKubeconfig && (kubeconfig != nil || context != nil) {
            throw ValidationError("--kubeconfig and --context go with --convert-kubeconfig.")
        }
    }

    /// What client-go sends in KUBERNETES_EXEC_INFO (the fields this plugin reads).
    struct ExecInfo: Decodable {
        struct Spec: Decodable { var interactive: Bool? }
        var apiVersion: String?
        var kind: String?
        var spec: Spec?
    }

    /// The answer client-go reads.
    struct ExecCredential: Encodable {
        struct Status: Encodable {
            var token: String
            var expirationTimestamp: String
        }
        var apiVersion: String
        var kind = "ExecCredential"
        var status: Status
    }

    func run() throws {
        try ToolTokenOptions.reportingOnOneLine {
            if convertKubeconfig { return try convert() }
            let info = try Self.execInfo()
            let apiVersion = info.apiVersion ?? Self.apiVersions[1]
            guard Self.apiVersions.contains(apiVersion) else {
                throw CLIError.usage("KUBERNETES_EXEC_INFO asks for apiVersion \(apiVersion), which this plugin does not speak.",
                                     hint: "Set the kubeconfig's exec apiVersion to client.authentication.k8s.io/v1 or v1beta1")
            }
            let result = try options.token(defaultScope: Self.aksScope, signIn: info.spec?.interactive == true, tool: "kubectl")
            let credential = ExecCredential(apiVersion: apiVersion, status: .init(
                token: result.accessToken, expirationTimestamp: result.expiresOn.formatted(.iso8601)))
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            JSONOutput.print(try encoder.encode(credential))
        }
    }

    /// KUBERNETES_EXEC_INFO parsed; client-go before 1.22 sent none (v1beta1 then).
    static func execInfo() throws -> ExecInfo {
        guard let text = StoreSettings.environment("KUBERNETES_EXEC_INFO") else { return ExecInfo() }
        do {
            return try JSONDecoder().decode(ExecInfo.self, from: Data(text.utf8))
        } catch {
            throw CLIError.usage("KUBERNETES_EXEC_INFO is not an ExecCredential (JSON): \(error).", hint: "Run this plugin from kubectl's exec stanza")
        }
    }

    // MARK: --convert-kubeconfig

    /// Rewrites the context's user to run this plugin, through kubectl itself (so the file keeps
    /// kubectl's own format), after copying the file to a backup next to it.
    private func convert() throws {
        let path = try Self.kubeconfigPath(kubeconfig)
        let file = ["--kubeconfig", path]
        let contextName = try context ?? Self.kubectl(file + ["config", "current-context"]).filter { !$0.isWhitespace }
        let user = try Self.kubectl(file + ["config", "view", "-o", "jsonpath={.contexts[?(@.name==\"\(contextName)\")].context.user}"])
            .filter { !$0.isWhitespace }
        guard !user.isEmpty else {
            throw CLIError.notFound("The kubeconfig \(path) has no context '\(contextName)' with a user.", hint: "Name one with --context (`kubectl config get-contexts`)")
        }
        let backup = try Self.backUp(path)
        var arguments = ["kubectl-credential"]
        if let client = options.client { arguments += ["--client", client.value] }
        for scope in options.scopes { arguments += ["--scopes", scope] }
        if let account = options.account { arguments += ["--account", account] }
        if let authority = options.authority { arguments += ["--authority", authority] }
        // The user's old credentials go: an exec stanza beside a token would not be used.
        for field in ["token", "auth-provider", "username", "password"] {
            _ = try? Self.kubectl(file + ["config", "unset", "users.\(user).\(field)"])
        }
        _ = try Self.kubectl(file + ["config", "set-credentials", user, "--exec-command=tokencache",
                                     "--exec-api-version=client.authentication.k8s.io/v1beta1"] + arguments.map { "--exec-arg=\($0)" })
        StandardIO.write(Data("Rewrote user \(user) (context \(contextName)) in \(path) to run `tokencache \(arguments.joined(separator: " "))`; the previous file is \(backup).\n".utf8),
                         to: STDOUT_FILENO)
    }

    /// --kubeconfig, else the first file of $KUBECONFIG, else ~/.kube/config.
    static func kubeconfigPath(_ option: String?) throws -> String {
        if let option { return option }
        if let list = StoreSettings.environment("KUBECONFIG"), let first = list.split(separator: ":").first { return String(first) }
        guard let home = StoreSettings.environment("HOME") else { throw CLIError.usage("No kubeconfig: HOME is not set.", hint: "Pass --kubeconfig PATH") }
        return home + "/.kube/config"
    }

    /// Copies the kubeconfig to PATH.tokencache-backup (PATH.tokencache-backup.N when that exists).
    static func backUp(_ path: String) throws -> String {
        let source = open(path, O_RDONLY | O_CLOEXEC)
        defer { if source >= 0 { close(source) } }
        guard source >= 0, let contents = StandardIO.readAll(from: source, limit: 64 << 20) else {
            throw CLIError.notFound("Could not read the kubeconfig \(path): \(String(cString: strerror(errno))).", hint: "Pass --kubeconfig PATH")
        }
        var backup = path + ".tokencache-backup", index = 1
        while access(backup, F_OK) == 0 { backup = path + ".tokencache-backup.\(index)"; index += 1 }
        let descriptor = open(backup, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CLIError.failed("Could not write the backup \(backup): \(String(cString: strerror(errno))).") }
        defer { close(descriptor) }
        guard StandardIO.write(contents, to: descriptor) else { throw CLIError.failed("Could not write the backup \(backup).") }
        return backup
    }

    /// Runs kubectl (found on PATH) and returns its stdout; its stderr goes to ours.
    static func kubectl(_ arguments: [String]) throws -> String {
        let result: (status: Int32, output: Data)
        do throws(Subprocess.SpawnFailure) { result = try Subprocess.run(["kubectl"] + arguments) } catch {
            throw CLIError.failed("Could not run kubectl: \(error.reason).", hint: "Install kubectl")
        }
        guard result.status == 0 else { throw CLIError.failed("kubectl \(arguments.joined(separator: " ")) failed (status \(result.status)).") }
        return String(decoding: result.output, as: UTF8.self)
    }
}
