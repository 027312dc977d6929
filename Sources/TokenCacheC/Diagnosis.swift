// tokencache_diagnose: the `tokencache doctor` report as text.
internal import CTokenCache
import FoundationEssentials
import TokenCache

/// The `tokencache doctor` report as text.
@_cdecl("tokencache_diagnose")
public func tokencache_diagnose(_ group: UnsafePointer<CChar>?, _ backend: Int32,
                                _ report: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                _ usable: UnsafeMutablePointer<Int32>?, _ error: UnsafeMutableRawPointer?) -> Int32 {
    report?.pointee = nil
    usable?.pointee = 0
    return boundary(error) { () throws(TokenCacheError) in
        let out = try requiredOut(report, "report")
        let diagnosis = BackendSelection.diagnose(policy: try backendPolicy(backend), group: try cacheGroup(group))
        var lines = ["Policy: \(diagnosis.policy.rawValue)",
                     "Backend: \(diagnosis.selected ?? "none usable")",
                     "Why: \(diagnosis.reason)"]
        lines += diagnosis.checks.map { "\($0.name): \($0.status.rawValue): \($0.detail)" }
        if let fix = diagnosis.fix { lines.append("Fix: \(fix)") }
        out.pointee = try mallocCopy(lines.joined(separator: "\n") + "\n")
        usable?.pointee = diagnosis.isUsable ? 1 : 0
    }
}
