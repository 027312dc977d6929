import Foundation
import Testing
import TokenCacheTestSupport

/// Snap, as far as it can be run here: no snapd (so no snap-confine and no AppArmor, and the
/// portal, which asks `snap routine portal-info` which snap a caller is, sees an unsandboxed
/// app). The harness sets what snapd sets for a strictly confined app (SNAP_NAME,
/// HOME=SNAP_USER_DATA, no XDG_DATA_HOME) in bubblewrap without /.flatpak-info; what is shown is
/// that we detect the Snap as libsecret does and keep the keyring where libsecret does.
extension PortalKeyringTests {
    @Test("In a Snap (SNAP_NAME, no /.flatpak-info) auto picks the portal keyring at $SNAP_USER_DATA/.local/share/keyrings, shared with libsecret")
    func snap() async throws {
        let snapped = { var test = self; test.snapName = "tokencache-t" + appID.suffix(8).lowercased(); return test }()
        let snapHome = home + "/snap/\(snapped.snapName!)"
        defer { try? FileManager.default.removeItem(atPath: snapHome) }
        try await offThePool {
            let doctor = try snapped.tokencache(["doctor"])
            let keyring = snapHome + "/x1/.local/share/keyrings/default.keyring"
            #expect(doctor.stdout.contains("Snap \(snapped.snapName!)") && doctor.stdout.contains("Backend file keyring \(keyring)"),
                    "\(doctor.stdout)\(doctor.stderr)")
            _ = try snapped.save(Fixtures.alice)
            #expect(FileManager.default.fileExists(atPath: keyring))
            #expect(try snapped.tokencache(["list"]).stdout.contains(Fixtures.alice.username))
            // libsecret in the same Snap picks its file backend by SNAP_NAME, finds the same file and decrypts our item.
            let search = try snapped.secretTool(["search", "--all", "group", group, "kind", "RefreshToken"])
            #expect(search.status == 0 && search.stdout.contains("label = Refresh token"), "\(search.stdout)\(search.stderr)")
        }
    }
}
