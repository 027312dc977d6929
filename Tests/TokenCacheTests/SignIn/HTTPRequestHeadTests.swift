import Testing
@testable import TokenCache

/// The loopback servers' request-head parser (the redirect listener, the managed-identity
/// endpoint) on fixed inputs; Fuzz/ (target http-request-head) covers the rest.
@Suite("HTTPRequestHead", .harness)
struct HTTPRequestHeadTests {
    /// Reads `text` through a reader in pieces of `piece` bytes: the head, or the failure.
    func read(_ text: String, piece: Int = .max) -> Result<HTTPRequestHead?, HTTPRequestHead.Failure> {
        var reader = HTTPRequestHead.Reader()
        var rest = Array(text.utf8)[...]
        repeat {
            let chunk = rest.prefix(piece)
            rest = rest.dropFirst(chunk.count)
            do throws(HTTPRequestHead.Failure) {
                if let head = try reader.append(chunk) { return .success(head) }
            } catch {
                return .failure(error)
            }
        } while !rest.isEmpty
        return .success(nil)
    }

    @Test("A browser's redirect parses to its method, target, path, query and fields; blanks around values are dropped; bytes after the head are ignored")
    func redirect() throws {
        let text = "GET /?code=c%201&state=s1&code=second HTTP/1.1\r\nHost: localhost:8400\r\nUser-Agent:\t Mozilla/5.0 (X11)  \r\nAccept: */*\r\n\r\nbody"
        let head = try #require(try read(text).get())
        #expect(head.method == "GET" && head.target == "/?code=c%201&state=s1&code=second" && head.version == "HTTP/1.1")
        #expect(head.path == "/")
        #expect(head.query == ["code": "c 1", "state": "s1"])
        #expect(head.fields == [.init(name: "Host", value: "localhost:8400"), .init(name: "User-Agent", value: "Mozilla/5.0 (X11)"),
                                .init(name: "Accept", value: "*/*")])
        #expect(head.values(of: "HOST") == ["localhost:8400"] && head.values(of: "cookie") == [])
    }

    @Test("A managed-identity request (HTTP/1.0 too) keeps repeated fields in order and empty values")
    func managedIdentity() throws {
        let text = "GET /msi/token?api-version=2019-08-01&resource=https://management.azure.com HTTP/1.0\r\nX-IDENTITY-HEADER: a\r\nx-identity-header: b\r\nMetadata:\r\n\r\n"
        let head = try #require(try read(text).get())
        #expect(head.version == "HTTP/1.0" && head.path == "/msi/token")
        #expect(head.query?["resource"] == "https://management.azure.com")
        #expect(head.values(of: "X-Identity-Header") == ["a", "b"] && head.values(of: "metadata") == [""])
    }

    @Test("The same head split at every byte, or in pieces of 1 to 7 bytes, parses to the same head; an incomplete one asks for more")
    func splitAcrossReads() throws {
        let text = "GET /cb?code=x&state=y HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n"
        let whole = try #require(try read(text).get())
        for piece in 1...7 { #expect(try read(text, piece: piece).get() == whole, "pieces of \(piece)") }
        let bytes = Array(text.utf8)
        for split in 1..<bytes.count {
            var reader = HTTPRequestHead.Reader()
            #expect(try reader.append(bytes[..<split]) == nil, "split at \(split)")
            #expect(try reader.append(bytes[split...]) == whole, "split at \(split)")
        }
        #expect(try read("GET / HTTP/1.1\r\nHost: localhost\r\n\r").get() == nil)
    }

    @Test("Malformed request lines are refused", arguments: [
        "\r\n\r\n", "\r\nGET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1 \r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "GET /\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n", "GET / HTTP/1.10\r\n\r\n", "GET / http/1.1\r\n\r\n", "GET http://localhost/ HTTP/1.1\r\n\r\n",
        "GET * HTTP/1.1\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n", "GET /a\u{7F} HTTP/1.1\r\n\r\n", "GET /é HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\n\r\n\r\n", "GET /\r HTTP/1.1\r\n\r\n",
    ])
    func malformedRequestLine(_ text: String) {
        #expect(read(text) == .failure(.malformedRequestLine))
    }

    @Test("Malformed header lines are refused: no colon, empty or spaced names, folded lines, control characters, lone CR or LF", arguments: [
        "Host localhost", ": x", "Host : localhost", "Ho st: localhost", " folded", "\tfolded", "Host: local\u{1}host",
        "Host: local\u{7F}host", "Host: a\rb", "Host: a\nb", "Host: localhost\nX: y",
    ])
    func malformedHeader(_ line: String) {
        #expect(read("GET / HTTP/1.1\r\n\(line)\r\n\r\n") == .failure(.malformedHeader))
    }

    @Test("A head of exactly the bound is taken; one byte more, or more bytes without an end of head, is too large, however it is split")
    func sizeBound() throws {
        let start = "GET / HTTP/1.1\r\nX-Padding: "
        let fits = start + String(repeating: "a", count: HTTPRequestHead.maximumBytes - start.utf8.count - 4) + "\r\n\r\n"
        #expect(fits.utf8.count == HTTPRequestHead.maximumBytes)
        #expect(try read(fits).get()?.values(of: "x-padding").first?.count == HTTPRequestHead.maximumBytes - start.utf8.count - 4)
        let over = start + String(repeating: "a", count: HTTPRequestHead.maximumBytes - start.utf8.count - 3) + "\r\n\r\n"
        let endless = start + String(repeating: "a", count: HTTPRequestHead.maximumBytes)
        for piece in [1000, 4096, .max] {
            #expect(read(over, piece: piece) == .failure(.tooLarge))
            #expect(read(endless, piece: piece) == .failure(.tooLarge))
        }
    }

    @Test("A reader wants at most one byte past the bound")
    func wanted() throws {
        var reader = HTTPRequestHead.Reader()
        #expect(reader.wanted == HTTPRequestHead.maximumBytes + 1)
        #expect(try reader.append(Array(repeating: UInt8(ascii: "a"), count: 100)) == nil)
        #expect(reader.wanted == HTTPRequestHead.maximumBytes + 1 - 100)
    }
}
