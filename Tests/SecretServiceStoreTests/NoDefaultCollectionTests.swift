import Foundation
import Testing
import TokenCacheTestSupport

/// A session whose gnome-keyring has no 'default' collection (#60 item 5): gnome-keyring started
/// by D-Bus activation with no login keyring, as in a fresh session of a desktop other than GNOME.
/// Where its prompt can be shown the backend creates the collection through it, as libsecret's
/// store does; where it cannot (no display) the error says so, typed, and `automatic` uses the
/// encrypted file.
@Suite("No 'default' collection: created through the provider's prompt, or typed and the file where it cannot be", .harness,
       .enabled(if: TestEnvironment.runsSecretServiceTests && TestEnvironment.provider == .gnomeKeyring,
                "gnome-keyring activated in a nested session of its own: runs in the GNOME Keyring run"))
struct NoDefaultCollectionTests {
    /// The keyring files gnome-keyring wrote and the object the 'default' alias points at, as a JSON line.
    static let keyringState = """
        alias=$(dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \\
            org.freedesktop.Secret.Service.ReadAlias string:default | awk '/object path/ {gsub(/"/, "", $3); print $3}')
        python3 -c 'import json, os, sys; d = sys.argv[1]; print(json.dumps({"alias": sys.argv[2], "files": sorted(os.listdir(d)) if os.path.isdir(d) else []}))' \\
            "$HOME/.local/share/keyrings" "$alias"
        """

    @Test("No display: reads, writes and a write allowed to prompt fail with collectionMissing, reason defaultCollectionUncreatable, saying what to do; automatic uses the encrypted file; no keyring appears")
    func headless() throws {
        let lines = try inFreshKeyring("""
            $H ss-no-default read
            $H ss-no-default read prompt
            $H ss-no-default save prompt
            $H ss-no-default auto
            \(Self.keyringState)
            """, loginKeyring: false)
        try #require(lines.count == 5, "\(lines)")
        for line in lines[0...2] {
            #expect(line["result"] as? String == "collectionMissing", "\(line)")
            #expect(line["reason"] as? String == "defaultCollectionUncreatable", "\(line)")
            #expect((line["message"] as? String)?.contains("none can be created here") == true, "\(line)")
            #expect((line["message"] as? String)?.contains("without a display") == true, "\(line)")
            let hint = line["hint"] as? String ?? ""
            #expect(hint.contains("--backend file") && hint.contains("secret-tool") && hint.contains("Seahorse"), "\(line)")
        }
        #expect(lines[3]["result"] as? String == "ok" && lines[3]["fallback"] as? Bool == true, "\(lines[3])")
        #expect((lines[3]["why"] as? String)?.contains("none can be created here") == true, "\(lines[3])")
        #expect(lines[4]["alias"] as? String == "/", "no default collection was made: \(lines[4])")
        #expect((lines[4]["files"] as? [String])?.contains { $0.hasSuffix(".keyring") } == false, "\(lines[4])")
    }

    @Test("With a display: no prompt without leave (defaultCollectionMissing, no fallback); a dismissed prompt is promptDismissed; a completed one creates 'Default keyring' as the default collection and the account is saved in it",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb") && FileManager.default.isExecutableFile(atPath: "/usr/libexec/gcr-prompter"),
                   "needs Xvfb and gcr-prompter (gnome-keyring's prompter), answered through AT-SPI (python3-pyatspi)"))
    func withDisplay() throws {
        let answer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/lib/answer-keyring-prompt.py").path
        // Xvfb writes its display number once it accepts connections; the answerer writes "ready"
        // once it listens to AT-SPI events. Both are read from FIFOs: nothing waits by the clock.
        let output = try inFreshKeyring("""
            mkfifo "$HOME/display" "$HOME/ready"
            Xvfb -displayfd 3 -screen 0 1024x768x24 -nolisten tcp 3>"$HOME/display" 2>"$HOME/xvfb.log" &
            xvfb=$!
            read -r number < "$HOME/display"
            export DISPLAY=":$number"
            # gcr-prompter is started by the bus, with the bus's environment: give it the display,
            # and GCR_PERSIST: it quits 10 s after a prompt, and a prompt sent as it quits is dismissed.
            export GCR_PERSIST=1
            dbus-update-activation-environment DISPLAY GCR_PERSIST
            $H ss-no-default read
            $H ss-no-default auto
            /usr/bin/python3 '\(answer)' --ready "$HOME/ready" --cancel &
            read -r _ < "$HOME/ready"
            $H ss-no-default save prompt
            wait $!
            /usr/bin/python3 '\(answer)' --ready "$HOME/ready" new-keyring-password &
            read -r _ < "$HOME/ready"
            $H ss-no-default save prompt
            wait $!
            $H ss-no-default read
            \(Self.keyringState)
            kill $xvfb
            """, loginKeyring: false)
        // The answerer's own lines say which button it pressed in which window, shown on a failure.
        let answers = output.filter { $0["answered"] != nil }, lines = output.filter { $0["answered"] == nil }
        #expect(answers.map { $0["answered"] as? String } == ["Cancel", "Continue"], "\(answers)")
        try #require(lines.count == 6, "\(lines) \(answers)")
        // A display, no prompts allowed: nothing shown, and a keyring could be made: no fallback.
        #expect(lines[0]["result"] as? String == "collectionMissing" && lines[0]["reason"] as? String == "defaultCollectionMissing", "\(lines[0])")
        #expect((lines[0]["hint"] as? String)?.contains("--allow-prompt") == true, "\(lines[0])")
        #expect(lines[1]["result"] as? String == "collectionMissing" && lines[1]["reason"] as? String == "defaultCollectionMissing",
                "automatic reports it rather than falling back: \(lines[1])")
        // The user dismissed "Choose password for new keyring".
        #expect(lines[2]["result"] as? String == "promptDismissed" && lines[2]["reason"] as? String == "createCollectionPromptDismissed", "\(lines[2])")
        // The user chose a password: the collection exists, is the default, and holds the account
        // (gnome-keyring names its path after the label: ' ' becomes '_', escaped as _5f).
        #expect(lines[3]["result"] as? String == "ok", "\(lines[3]) \(answers)")
        #expect(lines[3]["collection"] as? String == "/org/freedesktop/secrets/collection/Default_5fkeyring", "\(lines[3])")
        #expect(lines[3]["accounts"] as? [String] == ["keyring@contoso.com"], "\(lines[3])")
        #expect(lines[4]["result"] as? String == "ok" && lines[4]["accounts"] as? [String] == ["keyring@contoso.com"], "read back without a prompt: \(lines[4])")
        #expect(lines[5]["alias"] as? String == "/org/freedesktop/secrets/collection/Default_5fkeyring", "\(lines[5])")
        #expect((lines[5]["files"] as? [String])?.contains { $0.hasPrefix("Default") && $0.hasSuffix(".keyring") } == true, "\(lines[5])")
    }
}
