// libFuzzer entry point for the parsers that read untrusted input. Built only by
// scripts/fuzz.sh (`swift build -sanitize=fuzzer`); TOKENCACHE_FUZZ_TARGET picks the parser:
//   msal-json       AccountStore.importMSALJSON
//   token-response  TokenResponse(json:) and saving it
//   jwt             IDTokenClaims(jwt:) and ClientInfo.parse
//   encrypted-file  the encrypted-file reader: input starting with the file magic is a cache
//                   file read through the backend; anything else is a decrypted payload, sealed
//                   with the right key and group so it reaches the JSON reader behind the tag
//   http-request-head  HTTPRequestHead.Reader (the loopback servers' request heads), whole and
//                   split into pieces the input's first byte sets
//   broker-request  BrokerProtocol.parse (the identity broker's request JSON) for every method
//   json-split      JSONParser.parseSplit, the two-core parse of large documents: split where the
//                   guess finds a section start and at offsets the input's first bytes set, it
//                   must give what one parser gives (the same value, or the same error)
import Foundation
@_spi(Backend) @testable import EncryptedFileStore
@testable import TokenCache
@testable import TokenCacheBroker
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCacheCrypto
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

let target = ProcessInfo.processInfo.environment["TOKENCACHE_FUZZ_TARGET"] ?? "msal-json"
let authority = try! Authority("https://login.microsoftonline.com/common")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    switch target {
    case "msal-json":
        let store = AccountStore(backend: InMemoryBackend())
        if (try? store.importMSALJSON(data)) != nil {
            // Whatever was imported must export and import again unchanged.
            let exported = try! store.exportMSALJSON()
            let again = AccountStore(backend: InMemoryBackend())
            _ = try! again.importMSALJSON(exported)
            precondition(try! again.exportMSALJSON() == exported, "export/import round trip changed the cache")
            for account in try! store.allAccounts() {
                _ = try? store.accessToken(clientID: "c", account: account, scopes: ["s"])
                _ = try? store.refreshTokens(clientID: ClientID("c"), account: account)
            }
        }
    case "token-response":
        let store = AccountStore(backend: InMemoryBackend())
        if (try? store.save(responseJSON: data, clientID: "client", authority: authority, scopes: ["User.Read"])) == nil {
            precondition(try! store.entries().isEmpty, "a refused response changed the cache")
        }
    case "jwt":
        let text = String(decoding: data, as: UTF8.self)
        _ = try? IDTokenClaims(jwt: text)
        _ = try? ClientInfo.parse(text)
        _ = Base64URL.decode(text)
    case "encrypted-file":
        fuzzEncryptedFile(data)
    case "http-request-head":
        fuzzRequestHead(Array(data))
    case "broker-request":
        fuzzBrokerRequest(String(decoding: data, as: UTF8.self))
    case "json-split":
        fuzzJSONSplit(data)
    default:
        fatalError("unknown TOKENCACHE_FUZZ_TARGET \(target)")
    }
    return 0
}

/// A private directory, key and group for the encrypted-file target; the seed corpus
/// (Fuzz/Corpus/encrypted-file) holds real files written with this key for this group.
let fuzzDirectory: URL = {
    var template = Array((NSTemporaryDirectory() + "/tokencache-fuzz.XXXXXX").utf8CString)
    precondition(mkdtemp(&template) != nil)
    return URL(fileURLWithPath: String(cString: template)).appendingPathComponent("cache")
}()
let fuzzKey = [UInt8](repeating: 0xF7, count: 32)
let fuzzGroup = try! CacheGroup("org.swift-tokencache.fuzz")

func fuzzEncryptedFile(_ input: Data) {
    _ = try? CacheFileFormat.parse(input, path: "fuzz")
    var file = input
    if !input.starts(with: CacheFileFormat.magic) {
        // A decrypted payload: seal it as the backend would, so the authenticated path reads it.
        let key = fuzzKey.withUnsafeBytes { SymmetricKey(copying: $0) }
        let header = CacheFileFormat.Header(group: fuzzGroup.name, keyID: try! key.identifier(), generation: 1)
        let nonce = [UInt8](repeating: 0, count: OpenSSL.nonceByteCount)
        let sealed = try! OpenSSL.seal(input, key: key, nonce: nonce, authenticating: try! CacheFileFormat.associatedData(for: header))
        file = try! CacheFileFormat.encode(header: header, nonce: nonce, sealed: sealed)
    }
    try! FileIO.ensureDirectory(fuzzDirectory)
    let backend = EncryptedFileBackend(directory: fuzzDirectory, keySource: .key(fuzzKey))
    let url = backend.fileURL(for: fuzzGroup)
    try! file.write(to: url)
    precondition(chmod(url.path, 0o600) == 0)
    // A listing's read refuses exactly what a full read refuses, and differs from it only by
    // the members the listing leaves out (JSONParser.Omission.listing: token secrets and what
    // no listing shows).
    let listed = try? EncryptedFileBackend(directory: fuzzDirectory, keySource: .key(fuzzKey)).loadForListing(fuzzGroup).entries
    do {
        let entries = try backend.load(fuzzGroup).entries
        precondition(listed?.count == entries.count, "a listing refused a file the full read accepts")
        let listedByKey = Dictionary((listed ?? []).map { ("\($0.kind.rawValue) \($0.key)", $0.fields) }) { _, last in last }
        for entry in entries {
            var expected = entry.fields
            if let rule = JSONParser.Omission.listing.rules[entry.kind.rawValue] {
                expected = expected.filter { !rule.omits($0.key) }
            }
            precondition(listedByKey["\(entry.kind.rawValue) \(entry.key)"] == expected, "a listing read an entry differently")
        }
        // What loads is usable by the account store.
        let store = AccountStore(backend: backend, group: fuzzGroup)
        for account in (try? store.allAccounts()) ?? [] {
            _ = try? store.accessToken(clientID: "c", account: account, scopes: ["s"])
        }
        _ = entries.count
    } catch {
        precondition(listed == nil, "a listing accepted a file the full read refuses")
        // Refused: a write must refuse as well, and leave the file exactly as it was.
        precondition((try? EncryptedFileBackend(directory: fuzzDirectory, keySource: .key(fuzzKey))
            .apply([], to: fuzzGroup, expected: nil)) == nil, "a write replaced a file that could not be read")
        precondition((try? Data(contentsOf: url)) == file, "a refused file was changed")
    }
}

/// Reads `input` (after its first byte, which sets the piece size) whole and in pieces: both give
/// the same head or the same failure, a head never comes from more than the bound, and a head
/// written back as HTTP parses to itself.
func fuzzRequestHead(_ input: [UInt8]) {
    guard let first = input.first else { return }
    let bytes = input.dropFirst()
    func read(piece: Int) -> Result<HTTPRequestHead?, HTTPRequestHead.Failure> {
        var reader = HTTPRequestHead.Reader()
        var rest = bytes
        repeat {
            let chunk = rest.prefix(piece)
            rest = rest.dropFirst(chunk.count)
            do throws(HTTPRequestHead.Failure) {
                if let head = try reader.append(chunk) { return .success(head) }
            } catch {
                return .failure(error)
            }
            precondition(reader.wanted > 0, "a reader wants no more bytes but gave no head or failure")
        } while !rest.isEmpty
        return .success(nil)
    }
    let whole = read(piece: .max)
    precondition(read(piece: Int(first % 16) + 1) == whole, "a head split across reads parsed differently")
    guard case .success(let head?) = whole else { return }
    let end = bytes.firstRange(of: [13, 10, 13, 10])!
    precondition(end.upperBound - bytes.startIndex <= HTTPRequestHead.maximumBytes, "a head over the bound was taken")
    _ = head.path
    _ = head.query
    // The head as `init(parsing:)` takes it: its lines, without the blank line that ends it.
    let text = (["\(head.method) \(head.target) \(head.version)"] + head.fields.map { "\($0.name): \($0.value)" }).joined(separator: "\r\n")
    // Values are decoded as UTF-8: only a head of valid UTF-8 round-trips byte for byte.
    if String(validating: bytes[..<end.lowerBound], as: UTF8.self) != nil {
        precondition((try? HTTPRequestHead(parsing: Array(text.utf8))) == head, "a head written back parsed differently")
    }
}

/// Parses `text` as every method's request: a request or a typed error, never a trap; what is
/// accepted keeps to the bounds, and every error reply is a JSON object with an integer status.
func fuzzBrokerRequest(_ text: String) {
    for method in BrokerWire.Method.allCases {
        do throws(BrokerProtocol.RequestError) {
            let request = try BrokerProtocol.parse(text, method: method)
            precondition(text.utf8.count <= BrokerProtocol.maximumRequestBytes, "an oversized request was taken")
            precondition(request.scopes.count <= BrokerProtocol.maximumScopes, "too many scopes were taken")
            precondition(request.scopes.allSatisfy { !$0.isEmpty && !$0.contains(" ") }, "an empty or spaced scope was taken")
        } catch {
            let reply = BrokerProtocol.errorReply(error)
            guard case .object(let status)? = (try? JSON.decodeObject(Data(reply.utf8)))?["error"], case .integer(6)? = status["status"] else {
                preconditionFailure("an error reply is not {\"error\": {\"status\": 6}}: \(reply)")
            }
        }
    }
}

/// One parser's outcome: the value, or the error's offset and reason.
func parseOutcome(_ parse: () throws(JSONParser.SyntaxError) -> JSONValue) -> String {
    do throws(JSONParser.SyntaxError) { return "value \(try parse())" } catch { return "error at \(error.offset): \(error.reason)" }
}

func fuzzJSONSplit(_ input: Data) {
    input.withUnsafeBytes { bytes in
        for omission in [nil, JSONParser.Omission.listing] {
            let whole = try? JSONParser.parse(bytes, maximumDepth: JSON.maximumDepth, omitting: omission, splittingFrom: .max)
            let wholeError = parseOutcome { () throws(JSONParser.SyntaxError) in
                try JSONParser.parse(bytes, maximumDepth: JSON.maximumDepth, omitting: omission, splittingFrom: .max)
            }
            var splits = [JSONParser.rootMemberStart(in: bytes)].compactMap { $0 }
            if bytes.count > 1 { splits += [Int(bytes[0]) * 256 + Int(bytes[1]), Int(bytes[bytes.count - 1])].map { $0 % (bytes.count + 1) } }
            for split in splits {
                do throws(JSONParser.SyntaxError) {
                    let parts = try JSONParser.parseSplit(bytes, at: split, maximumDepth: JSON.maximumDepth, omitting: omission,
                                                          allowingTrailingCommas: false)
                    precondition(parts == whole, "a split at \(split) read another value")
                } catch {
                    precondition(whole == nil && "error at \(error.offset): \(error.reason)" == wholeError,
                                 "a split at \(split) failed otherwise: \(error.reason) at \(error.offset), one parser: \(wholeError)")
                }
            }
        }
    }
}

