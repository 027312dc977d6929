import FoundationEssentials

/// Dates as `Date.formatted(.iso8601)` writes them (`2026-11-25T18:03:08Z`), for the listing's
/// JSON: FoundationEssentials' format style cost about 9,000 instructions a date, 27 million for
/// the 3,000 expiry times of a 1,000-account listing. A whole second in years 1600-9999 is
/// written here (Foundation's calendar is Julian before October 1582); anything else (a
/// fractional second, a year out of that range) by the format style.
package enum ISO8601 {
    package static func string(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        // 1600-01-01T00:00:00Z and 10000-01-01T00:00:00Z.
        guard interval.rounded(.down) == interval, interval >= -11_676_096_000, interval < 253_402_300_800 else {
            return date.formatted(.iso8601)
        }
        let seconds = Int64(interval)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's civil_from_days).
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        var text = [UInt8]()
        text.reserveCapacity(20)
        func append(_ value: Int64, digits: Int) {
            var divisor: Int64 = 1
            for _ in 1..<digits { divisor *= 10 }
            var value = value
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(value / divisor))
                value %= divisor
                divisor /= 10
            }
        }
        append(year, digits: 4)
        text.append(UInt8(ascii: "-"))
        append(month, digits: 2)
        text.append(UInt8(ascii: "-"))
        append(day, digits: 2)
        text.append(UInt8(ascii: "T"))
        append(secondOfDay / 3_600, digits: 2)
        text.append(UInt8(ascii: ":"))
        append(secondOfDay / 60 % 60, digits: 2)
        text.append(UInt8(ascii: ":"))
        append(secondOfDay % 60, digits: 2)
        text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }
}
