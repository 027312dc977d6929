package import CCurl
import TokenCacheCore
import TokenCachePlatform
import FoundationEssentials

/// The default HTTP transport: libcurl, loaded at run time on the first request.
///
/// TLS is verified against the system's trust store, or against `caBundle` when given (an
/// enterprise or test CA). Only http and https are followed, redirects are not, and responses
/// larger than `maxResponseBytes` are refused. The blocking transfer runs at once on a thread of
/// the library's transfer pool (never the cooperative pool, never behind store work), or on the
/// caller's own thread for the library's blocking callers, and its timeout is libcurl's own,
/// counted from the transfer's start; cancelling the task aborts it.
public struct CurlTransport: HTTPTransport, BlockingHTTPTransport {
    /// A PEM file of the certificate authorities to trust instead of the system's.
    public var caBundle: URL?
    /// The largest response body accepted: token responses are a few kilobytes, so no app needs
    /// another bound (package: tests lower it to see the refusal).
    package var maxResponseBytes = 4 << 20

    /// Creates a transport.
    /// - Parameter caBundle: a PEM file of certificate authorities to trust instead of the system's.
    public init(caBundle: URL? = nil) {
        self.caBundle = caBundle
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let transfer = try self.transfer(request)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                do {
                    try BlockingPool.transfers.submit("HTTP transfer") { continuation.resume(with: transfer.perform()) }
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            transfer.cancel()
        }
    }

    /// The transfer on the calling thread: what ``send(_:)`` does, without a thread of the pool.
    package func sendBlocking(_ request: HTTPRequest, cancelled: @escaping @Sendable () -> Bool) throws -> HTTPResponse {
        let transfer = try self.transfer(request)
        transfer.cancelledWhen = cancelled
        return try transfer.perform().get()
    }

    /// A request's transfer, checked (http and https only) and set up, not started.
    private func transfer(_ request: HTTPRequest) throws -> CurlTransfer {
        guard let scheme = request.url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HTTPTransportError(.other, detail: "only http and https URLs are sent")
        }
        return try CurlTransfer(try LibCurl.shared(), request, caBundle: caBundle, maxResponseBytes: maxResponseBytes)
    }
}

/// libcurl, loaded at run time (`LoadedLibrary`) on the first request. `TOKENCACHE_LIBCURL_PATH`
/// overrides the file (default: `libcurl.so.4`, then Debian's `libcurl-gnutls.so.4`).
package typealias LibCurl = LoadedLibrary<LibCurlDescriptor>

/// How libcurl is found, initialized and reported (``LibCurl``).
package enum LibCurlDescriptor: LibraryDescriptor {
    package static let loaded = LibCurl.load()
    package static let facts = LibraryFacts(name: "libcurl", role: "which refreshing tokens needs", sonames: ["libcurl.so.4", "libcurl-gnutls.so.4"],
                                    overrideVariable: "TOKENCACHE_LIBCURL_PATH", packages: ("libcurl4", nil),
                                    otherwise: "pass your own HTTPTransport", missingCode: .libcurlMissing)

    package static func resolve(_ handle: UnsafeMutableRawPointer) -> (TCCurlFunctions, missing: UnsafePointer<CChar>?) {
        var functions = TCCurlFunctions()
        let missing = tc_curl_resolve(handle, &functions)
        return (functions, missing)
    }

    /// curl_global_init is not thread-safe in older libcurl: done once, under `loaded`'s lock.
    package static func prepare(_ functions: TCCurlFunctions) -> String? {
        functions.curl_global_init(Int(TC_CURL_GLOBAL_DEFAULT)) == TC_CURLE_OK ? nil : "curl_global_init failed"
    }

    /// The file and curl_version(): "libcurl/8.x OpenSSL/3.x ...".
    package static func describe(_ library: LibCurl) -> String {
        "libcurl (loaded: \(library.path), \(library.functions.curl_version().map { String(cString: $0) } ?? "?"))"
    }
}

/// One request's libcurl easy handle, header list and response, freed in deinit.
private final class CurlTransfer: @unchecked Sendable {
    // @unchecked: `perform` runs once on one thread; `cancel` only sets the atomic-by-lock flag.
    private let curl: LibCurl
    private let handle: UnsafeMutableRawPointer
    private var headerList: OpaquePointer?
    private let maxResponseBytes: Int
    private let cancelled = Locked(false)
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(TC_CURL_ERROR_SIZE))
    private var body = Data()
    private var headers: [String: String] = [:]
    private var tooLarge = false
    /// Asked as the transfer runs, besides ``cancel()``: set before ``perform()``, on its thread.
    var cancelledWhen: (@Sendable () -> Bool)?
    /// Whether the server's answer began (its status line): a cancellation then no longer aborts
    /// the transfer, so an answer whose refresh token the server rotated is read to its end.
    private var answering = false

    init(_ curl: LibCurl, _ request: HTTPRequest, caBundle: URL?, maxResponseBytes: Int) throws {
        guard let handle = curl.functions.curl_easy_init() else {
            throw HTTPTransportError(.other, detail: "curl_easy_init failed")
        }
        self.curl = curl
        self.handle = handle
        self.maxResponseBytes = maxResponseBytes
        errorBuffer.initialize(to: 0)

        var functions = curl.functions
        var failed = false
        func long(_ option: Int32, _ value: Int) { failed = failed || tc_curl_setopt_long(&functions, handle, option, value) != TC_CURLE_OK }
        func string(_ option: Int32, _ value: String) {
            // libcurl copies string options (since 7.17).
            failed = failed || value.withCString { tc_curl_setopt_pointer(&functions, handle, option, $0) } != TC_CURLE_OK
        }
        func pointer(_ option: Int32, _ value: UnsafeRawPointer?) {
            failed = failed || tc_curl_setopt_pointer(&functions, handle, option, value) != TC_CURLE_OK
        }
        string(Int32(TC_CURLOPT_URL), request.url.absoluteString)
        long(Int32(TC_CURLOPT_PROTOCOLS), Int(TC_CURLPROTO_HTTP | TC_CURLPROTO_HTTPS))
        long(Int32(TC_CURLOPT_FOLLOWLOCATION), 0)
        long(Int32(TC_CURLOPT_NOSIGNAL), 1)  // no SIGALRM for DNS timeouts in a threaded process
        long(Int32(TC_CURLOPT_TIMEOUT_MS), Int(max(request.timeout, 0.001) * 1000))
        long(Int32(TC_CURLOPT_CONNECTTIMEOUT_MS), Int(max(request.timeout, 0.001) * 1000))
        if let caBundle { string(Int32(TC_CURLOPT_CAINFO), caBundle.path) }
        pointer(Int32(TC_CURLOPT_ERRORBUFFER), errorBuffer)
        if request.method.uppercased() == "POST" {
            let body = request.body ?? Data()
            long(Int32(TC_CURLOPT_POST), 1)
            failed = failed || tc_curl_setopt_size(&functions, handle, Int32(TC_CURLOPT_POSTFIELDSIZE_LARGE), Int64(body.count)) != TC_CURLE_OK
            // COPYPOSTFIELDS: libcurl keeps its own copy, so `body` need not outlive this call.
            failed = failed || body.withUnsafeBytes { tc_curl_setopt_pointer(&functions, handle, Int32(TC_CURLOPT_COPYPOSTFIELDS), $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)) } != TC_CURLE_OK
        } else {
            long(Int32(TC_CURLOPT_HTTPGET), 1)
        }
        // "Expect:" off: a form body over 1 KiB would otherwise wait for a 100-continue.
        for line in request.headers.map({ "\($0.key): \($0.value)" }) + ["Expect:"] {
            headerList = line.withCString { curl.functions.curl_slist_append(headerList, $0) }
        }
        pointer(Int32(TC_CURLOPT_HTTPHEADER), UnsafeRawPointer(headerList))

        let context = Unmanaged.passUnretained(self).toOpaque()
        failed = failed || tc_curl_setopt_data_callback(&functions, handle, Int32(TC_CURLOPT_WRITEFUNCTION), { data, size, count, context in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            guard transfer.body.count + length <= transfer.maxResponseBytes else {
                transfer.tooLarge = true
                return 0  // aborts with CURLE_WRITE_ERROR
            }
            if let data { transfer.body.append(UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: length) }
            return length
        }) != TC_CURLE_OK
        pointer(Int32(TC_CURLOPT_WRITEDATA), context)
        failed = failed || tc_curl_setopt_data_callback(&functions, handle, Int32(TC_CURLOPT_HEADERFUNCTION), { data, size, count, context in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            if let data { transfer.header(line: String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)) }
            return length
        }) != TC_CURLE_OK
        pointer(Int32(TC_CURLOPT_HEADERDATA), context)
        long(Int32(TC_CURLOPT_NOPROGRESS), 0)
        failed = failed || tc_curl_setopt_progress_callback(&functions, handle, Int32(TC_CURLOPT_XFERINFOFUNCTION), { context, _, _, _, _ in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            return !transfer.answering && (transfer.cancelled.withLock { $0 } || transfer.cancelledWhen?() == true) ? 1 : 0
        }) != TC_CURLE_OK
        pointer(Int32(TC_CURLOPT_XFERINFODATA), context)
        if failed { throw HTTPTransportError(.other, detail: "this libcurl refused an option") }
    }

    deinit {
        curl.functions.curl_easy_cleanup(handle)
        curl.functions.curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    func cancel() { cancelled.withLock { $0 = true } }

    /// Runs the transfer (blocking).
    func perform() -> Result<HTTPResponse, any Error> {
        if cancelled.withLock({ $0 }) || cancelledWhen?() == true { return .failure(HTTPTransportError(.cancelled, detail: "cancelled")) }
        let code = curl.functions.curl_easy_perform(handle)
        guard code == TC_CURLE_OK else { return .failure(error(code)) }
        var functions = curl.functions
        var status = 0
        tc_curl_getinfo_long(&functions, handle, Int32(TC_CURLINFO_RESPONSE_CODE), &status)
        return .success(HTTPResponse(status: status, headers: headers, body: body))
    }

    /// Header lines of the last response (a new status line starts over: 100-continue, proxies).
    private func header(line: String) {
        let text = ASCII.trimmed(line, newlines: true)
        if text.hasPrefix("HTTP/") { headers = [:]; answering = true; return }
        guard let colon = text.firstIndex(of: ":") else { return }
        let name = ASCII.trimmed(text[..<colon]).lowercased()
        headers[name] = ASCII.trimmed(text[text.index(after: colon)...])
    }

    private func error(_ code: TCCurlCode) -> HTTPTransportError {
        let message = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : (curl.functions.curl_easy_strerror(code).map { String(cString: $0) } ?? "libcurl error \(code)")
        switch Int(code) {
        case Int(TC_CURLE_OPERATION_TIMEDOUT): return HTTPTransportError(.timedOut, detail: message)
        case Int(TC_CURLE_COULDNT_CONNECT): return HTTPTransportError(.connectionRefused, detail: message)
        case Int(TC_CURLE_COULDNT_RESOLVE_HOST): return HTTPTransportError(.hostNotFound, detail: message)
        case Int(TC_CURLE_SSL_CONNECT_ERROR), Int(TC_CURLE_PEER_FAILED_VERIFICATION), Int(TC_CURLE_SSL_CERTPROBLEM),
             Int(TC_CURLE_SSL_CACERT_BADFILE):
            return HTTPTransportError(.tls, detail: message)
        case Int(TC_CURLE_ABORTED_BY_CALLBACK): return HTTPTransportError(.cancelled, detail: message)
        case Int(TC_CURLE_WRITE_ERROR) where tooLarge: return HTTPTransportError(.responseTooLarge, detail: "over \(maxResponseBytes) bytes")
        default: return HTTPTransportError(.other, detail: message)
        }
    }
}
