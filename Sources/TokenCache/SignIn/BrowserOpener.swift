#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLinux
import Dispatch
import FoundationEssentials
import TokenCacheDBus
import TokenCacheCore
import TokenCachePlatform
import TokenCachePipeline

/// How the interactive sign-in opens the sign-in page in a browser.
///
/// Every opener is given the sign-in's start page (a random path, valid while it waits), `http://localhost:<port>/start/<random>`,
/// never the authorization URL itself: the loopback listener answers it with a redirect to the
/// authorization page, and only to a connection of this process's user. So the `state`, PKCE
/// challenge and `nonce` never appear in a browser's arguments, which every local user can read
/// in /proc.
///
/// ``system`` runs the `$BROWSER` command when it is set (as xdg-open, Python's webbrowser and gh
/// do; in VS Code devcontainers and Codespaces it opens the host's browser), else asks the XDG
/// desktop portal (`org.freedesktop.portal.OpenURI`, which also works from Flatpak and Snap
/// sandboxes), else runs `xdg-open` when there is a display. ``custom(_:)`` hands the start page
/// to the app (its own web view, a specific browser, or a test's headless browser).
public struct BrowserOpener: Sendable {
    let opener: @Sendable (URL) async throws -> Void
    /// The opener run on the calling thread, when it has one (the system's, the command line's).
    let openerHere: (@Sendable (URL) throws(TokenCacheError) -> Void)?

    init(opener: @escaping @Sendable (URL) async throws -> Void) {
        self.opener = opener
        openerHere = nil
    }

    /// An opener that blocks the calling thread until it has handed the URL over.
    package init(here: @escaping @Sendable (URL) throws(TokenCacheError) -> Void) {
        opener = { url in try await BlockingWork.run { () throws(TokenCacheError) in try here(url) } }
        openerHere = here
    }

    /// Opens the URL: a custom opener can add to the system one (print the URL, then open it).
    public func open(_ url: URL) async throws {
        try await opener(url)
    }

    /// Opens the URL on the calling thread, one that may block: a blocking opener directly, an
    /// app's own async function through the bridge, whose task `isCancelled` cancels.
    func openBlocking(_ url: URL, isCancelled: @escaping @Sendable () -> Bool) throws {
        if let openerHere { return try openerHere(url) }
        try waitFor(cancellingWhen: isCancelled) { [opener] () async throws in try await opener(url) }
    }

    /// `$BROWSER` when set, else the desktop portal's OpenURI, else `xdg-open` when there is a
    /// display (started directly, not through a shell). Fails with `browserUnavailable` when none
    /// can open a browser, for example in an SSH session with no display: use the device code
    /// flow there.
    public static let system = BrowserOpener(here: { url throws(TokenCacheError) in try SystemBrowser.openHere(url) })

    /// Opens the URL as ``system`` does, on the calling thread (for a front end's own opener).
    package static func openSystemBrowser(_ url: URL) throws(TokenCacheError) {
        try SystemBrowser.openHere(url)
    }

    /// The system opener, seeing `environment` instead of the process's (for tests).
    static func system(environment: [String: String]) -> BrowserOpener {
        BrowserOpener(here: { url throws(TokenCacheError) in try SystemBrowser.openHere(url, environment: environment) })
    }

    /// Opens the URL with the app's own function. An error it throws ends the sign-in with
    /// `browserUnavailable`. The URL is the start page on the loopback listener: a browser or
    /// web view must load it as this process's user (another user's connection is refused).
    public static func custom(_ open: @escaping @Sendable (URL) async throws -> Void) -> BrowserOpener {
        BrowserOpener(opener: open)
    }
}

/// The system browser: $BROWSER, portal, then xdg-open.
enum SystemBrowser {
    /// How long the portal may take to accept the request (it answers at once; the user's
    /// choice of application comes later as a signal this flow does not need).
    static let portalTimeoutMilliseconds: Int32 = 10_000
    /// How long a browser command gets to report a failure; still running after that, it has
    /// handed the URL to a browser (some desktops keep it running until the browser exits).
    static let commandGrace: Duration = .seconds(5)

    /// `environment` is the process's; tests pass their own.
    static func openHere(_ url: URL, environment: [String: String] = ProcessInfo.processInfo.environment) throws(TokenCacheError) {
        if let browser = environment["BROWSER"], !browser.isEmpty {
            return try openWithBrowserVariable(browser, url: url.absoluteString)
        }
        let portal = DesktopPortal.openURI(url.absoluteString, timeoutMilliseconds: portalTimeoutMilliseconds)
        guard let portal else { return }
        // With no display, xdg-open would fall back to a console browser on this terminal.
        guard !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty else {
            throw TokenCacheError(.browserUnavailable, "No browser can be opened: BROWSER is not set, \(portal), and no display (DISPLAY, WAYLAND_DISPLAY).",
                                  hint: "Sign in with the device code flow (acquireTokenWithDeviceCode) in SSH sessions and on headless machines, or set BROWSER to a command that opens a URL",
                                  reason: .noDisplay)
        }
        switch run(["xdg-open", url.absoluteString]) {
        case .opened: return
        case .notStarted(let reason):
            throw TokenCacheError(.browserUnavailable, "xdg-open could not be started: \(reason).",
                                  hint: "Install xdg-utils, set BROWSER, pass a BrowserOpener.custom, or sign in with the device code flow",
                                  reason: .xdgOpenMissing)
        case .failed(let status):
            throw TokenCacheError(.browserUnavailable, "xdg-open could not open a browser (exit status \(status)).",
                                  hint: "Set a default browser (xdg-settings set default-web-browser), pass a BrowserOpener.custom, or sign in with the device code flow",
                                  reason: .xdgOpenFailed)
        }
    }

    /// Tries each command of `$BROWSER` (colon-separated) until one opens the page: `%s` in a
    /// command is replaced by the URL (`%%` is a percent sign), else the URL is appended.
    private static func openWithBrowserVariable(_ variable: String, url: String) throws(TokenCacheError) {
        var failures: [String] = []
        for command in browserCommands(variable, url: url) {
            switch run(command) {
            case .opened: return
            case .notStarted(let reason): failures.append("\(command[0]): \(reason)")
            case .failed(let status): failures.append("\(command[0]): exit status \(status)")
            }
        }
        throw TokenCacheError(.browserUnavailable, "No command in BROWSER could open the sign-in page (\(failures.isEmpty ? "it names no command" : failures.joined(separator: "; "))).",
                              hint: "Fix or unset BROWSER, or sign in with the device code flow (acquireTokenWithDeviceCode)",
                              reason: .browserCommandFailed)
    }

    /// The argument vectors `$BROWSER` names for `url` (words split as a shell would, quotes kept together).
    static func browserCommands(_ variable: String, url: String) -> [[String]] {
        variable.split(separator: ":").compactMap { entry in
            let words = shellWords(String(entry))
            guard !words.isEmpty else { return nil }
            guard entry.contains("%s") else { return words + [url] }
            // %% first, so a literal "%s" written as "%%s" stays; the URL itself never has a NUL.
            return words.map { $0.replacing("%%", with: "\u{0}").replacing("%s", with: url).replacing("\u{0}", with: "%") }
        }
    }

    /// Splits on blanks outside quotes; single quotes keep everything, double quotes and a
    /// backslash escape the next character.
    private static func shellWords(_ text: String) -> [String] {
        var words: [String] = [], word = "", inWord = false
        var quote: Character?, escaped = false
        for character in text {
            if escaped { word.append(character); escaped = false; continue }
            switch (quote, character) {
            case (nil, " "), (nil, "\t"):
                if inWord { words.append(word); word = ""; inWord = false }
            case ("\'", "\'"), ("\"", "\""): quote = nil
            case (nil, "\'"), (nil, "\""): quote = character; inWord = true
            case (nil, "\\"), ("\"", "\\"): escaped = true; inWord = true
            default: word.append(character); inWord = true
            }
        }
        if inWord { words.append(word) }
        return words
    }

    enum RunResult {
        case opened
        case notStarted(String)
        case failed(Int32)
    }

    /// Runs a command (found on PATH, with /dev/null for its standard streams) and waits a
    /// moment for an early failure.
    private static func run(_ command: [String]) -> RunResult {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        // Nothing else of the app's (its files, sockets, a parent's exit pipe) goes to the browser.
        tc_spawn_close_from(&actions, 3)
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { (text: String) in strdup(text) }
        defer { arguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = (arguments + [nil]).withUnsafeBufferPointer { argv in
            posix_spawnp(&pid, command[0], &actions, nil, argv.baseAddress!, environ)
        }
        guard spawned == 0 else { return .notStarted(String(cString: strerror(spawned))) }
        // A pool thread waits for the command's exit (and reaps it whenever it ends, so it leaves
        // no zombie); this one waits for that exit at most the grace, woken by it, not polling.
        let child = pid
        let exitStatus = Locked<Int32?>(nil), exited = DispatchSemaphore(value: 0)
        do {
            try BlockingPool.shared.submit("browser command reaper") {
                var status: Int32 = 0
                while waitpid(child, &status, 0) < 0 {
                    if errno != EINTR { return }
                }
                exitStatus.withLock { $0 = status }
                exited.signal()
            }
        } catch {
            return .opened  // no thread to watch it: taken as handed over, as one still running
        }
        guard exited.wait(timeout: .now() + .milliseconds(Int(commandGrace.components.seconds * 1000))) == .success,
              let status = exitStatus.withLock({ $0 }) else {
            return .opened  // still running: it handed the URL over
        }
        // WIFEXITED/WEXITSTATUS are macros: exited normally is a zero low byte.
        let exitCode = (status >> 8) & 0xff
        return status & 0x7f == 0 && exitCode == 0 ? .opened : .failed(status & 0x7f == 0 ? exitCode : 128 + (status & 0x7f))
    }
}
