import Foundation
import Testing
@testable import TokenCacheCore
import TokenCacheTestSupport

@Suite("ISO 8601 dates", .harness)
struct ISO8601Tests {
    @Test("Dates are written exactly as Date.formatted(.iso8601) writes them: whole seconds across years 1-9999 (Julian before 1582 in Foundation), leap days, before 1970, and fractional seconds")
    func sameAsFoundation() {
        var generator = SystemRandomNumberGenerator()
        var intervals: [TimeInterval] = [0, -1, 1, 86_399, 86_400, -86_400, 951_782_400, 951_868_800, -2_203_891_200, 1_795_628_252,
                                         -62_135_596_800, -11_676_096_000, -11_676_096_001, 253_402_300_799, 253_402_300_800, -62_135_596_801, 1_700_000_000.5, -0.25]
        for _ in 0..<20_000 { intervals.append(TimeInterval(Int64.random(in: -62_135_596_800..<253_402_300_800, using: &generator))) }
        for interval in intervals {
            let date = Date(timeIntervalSince1970: interval)
            #expect(ISO8601.string(date) == date.formatted(.iso8601), "\(interval)")
        }
    }
}
