#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLinux
import Dispatch
import FoundationEssentials
import SecretServiceStore
import TokenCacheCore

/// How the interactive sign-in opens the authorization URL in a browser.
///
/// ``system`` asks the XDG desktop portal (`org.freedesktop.portal.OpenURI`) when one answers on
/// the session bus, which also works from Flatpak and Snap sandboxes, and runs `xdg-open`
/// otherwise. ``custom(_:)`` hands the URL to the app (its own web view, a specific browser,
/// or a test's headless browser).
public struct BrowserOpener: Sendable {
    let opener: @Sendable (URL) async throws -> Void

    /// Opens the URL: a custom opener can add to the system one (print the URL, then open it).
    public func open(_ url: URL) async throws {
        try await opener(url)
    }

    /// The desktop portal's OpenURI when available, else `xdg-open` (started directly, not
    /// through a shell). Fails with `browserUnavailable` when neither can open a browser, for
    /// example in an SSH session with no display: use the device code flow there.
    public static let system = BrowserOpener(opener: { url in try await SystemBrowser.open(url) })

    /// Opens the URL with the app's own function. An error it throws ends the sign-in with
    /// `browserUnavailable`.
    public static func custom(_ open: @escaping @Sendable (URL) async throws -> Void) -> BrowserOpener {
        BrowserOpener(opener: open)
    }
}

/// The system browser: portal, then xdg-open.
enum SystemBrowser {
    /// How long the portal may take to accept the request (it answers at once; the user's
    /// choice of application comes later as a signal this flow does not need).
    static let portalTimeoutMilliseconds: Int32 = 10_000
    /// How long xdg-open gets to report a failure; still running after that, it has handed the
    /// URL to a browser (some desktops keep it running until the browser exits).
    static let xdgOpenGrace: Duration = .seconds(5)

    /// `environment` is the process's; tests pass one without a display.
    static func open(_ url: URL, environment: [String: String] = ProcessInfo.processInfo.environment) async throws(TokenCacheError) {
        try await BlockingWork.run { () throws(TokenCacheError) in
            let portal = DesktopPortal.openURI(url.absoluteString, timeoutMilliseconds: portalTimeoutMilliseconds)
            guard let portal else { return }
            // With no display, xdg-open would fall back to a console browser on this terminal.
            guard !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty else {
                throw TokenCacheError(.browserUnavailable, "No browser can be opened: \(portal), and no display (DISPLAY, WAYLAND_DISPLAY).",
                                      hint: "Sign in with the device code flow (acquireTokenWithDeviceCode) in SSH sessions and on headless machines")
            }
            try xdgOpen(url)
        }
    }

    /// Runs `xdg-open <url>` (found on PATH, with /dev/null for its standard streams) and waits
    /// a moment for an early failure.
    private static func xdgOpen(_ url: URL) throws(TokenCacheError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        // Nothing else of the app's (its files, sockets, a parent's exit pipe) goes to the browser.
        tc_spawn_close_from(&actions, 3)
        let arguments: [UnsafeMutablePointer<CChar>?] = ["xdg-open", url.absoluteString].map { (text: String) in strdup(text) }
        defer { arguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = (arguments + [nil]).withUnsafeBufferPointer { argv in
            posix_spawnp(&pid, "xdg-open", &actions, nil, argv.baseAddress!, environ)
        }
        guard spawned == 0 else {
            throw TokenCacheError(.browserUnavailable, "xdg-open could not be started: \(String(cString: strerror(spawned))).",
                                  hint: "Install xdg-utils, pass a BrowserOpener.custom, or sign in with the device code flow")
        }
        let giveUp = ContinuousClock.now + xdgOpenGrace
        var status: Int32 = 0
        while ContinuousClock.now < giveUp {
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid {
                // WIFEXITED/WEXITSTATUS are macros: exited normally is a zero low byte.
                let exitCode = (status >> 8) & 0xff
                guard status & 0x7f == 0, exitCode == 0 else {
                    throw TokenCacheError(.browserUnavailable, "xdg-open could not open a browser (exit status \(exitCode)).",
                                          hint: "Set a default browser (xdg-settings set default-web-browser), pass a BrowserOpener.custom, or sign in with the device code flow")
                }
                return
            }
            if done < 0 && errno != EINTR { return }
            usleep(50_000)
        }
        // Still running: it handed the URL over. Reap it whenever it ends, so it leaves no zombie.
        let child = pid
        DispatchQueue.global().async { var ignored: Int32 = 0; _ = waitpid(child, &ignored, 0) }
    }
}
