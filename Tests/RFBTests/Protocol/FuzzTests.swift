import Foundation
@testable import RFB
import Testing

/// Mutation fuzzing over recorded real-server streams (see Fixtures/README.md): byte flips,
/// hostile length fields, truncation, deletion, insertion and duplication, delivered in random
/// chunk sizes. Every run must end — decoded or closed with a typed error — without a crash,
/// a trap or a hang. Deterministic seeds keep failures reproducible.
@Suite(.timeLimit(.minutes(3)))
struct FuzzTests {
    static let captureNames: [String] = {
        let folder = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/captures")
        return ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".rfb") }.sorted()
    }()

    static func load(_ name: String) throws -> RFBCapture {
        let url = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/captures/\(name)")
        return try RFBCapture(bytes: Array(try Data(contentsOf: url)))
    }

    @Test func fixturesArePresent() {
        #expect(Self.captureNames.count >= 8, "recorded captures missing: run scripts/make-rfb-fixtures")
    }

    @Test(arguments: captureNames)
    func realServerStreamDecodesToItsEnd(name: String) throws {
        let capture = try Self.load(name)
        let whole = try RFBReplay.run(capture)
        #expect(whole.error == nil, "\(name): \(String(describing: whole.error))")
        #expect(whole.updates > 1 && whole.pixels > 0)
        // Delivery in any chunk sizes must not change a single pixel: a byte at a time (every
        // message finished in the input buffer), odd sizes (messages straddling reads, parsed
        // partly from the buffer and partly straight from the read), and large reads.
        for chunkSize in [1, 7, 997, 65_536] {
            let trickled = try RFBReplay.run(capture, chunkSize: chunkSize)
            #expect(trickled.framebuffer == whole.framebuffer, "\(name) in \(chunkSize)-byte reads")
            #expect(trickled.rectangles == whole.rectangles, "\(name) in \(chunkSize)-byte reads")
            #expect(trickled.updates == whole.updates, "\(name) in \(chunkSize)-byte reads")
            #expect(trickled.lastMessageBoundary == whole.lastMessageBoundary, "\(name) in \(chunkSize)-byte reads")
        }
    }

    @Test(arguments: captureNames)
    func mutatedStreamsNeverCrash(name: String) throws {
        let capture = try Self.load(name)
        var rng = SplitMix(seed: name.utf8.reduce(UInt64(17)) { $0 &* 31 &+ UInt64($1) })
        var outcomes = (decoded: 0, refused: 0)
        var badMessages: [String] = []
        let iterations = Int(ProcessInfo.processInfo.environment["FARCAST_FUZZ_ITERATIONS"] ?? "") ?? 600
        for _ in 0..<iterations {
            var mutated = capture
            var bytes = Array(capture.stream)
            mutate(&bytes, &rng)
            mutated.stream = bytes[...]
            let result = try RFBReplay.run(mutated, chunkSize: 1 + rng.below(8192))
            if let error = result.error {
                outcomes.refused += 1
                // What a user would read: one non-empty line.
                let text = error.description
                if text.isEmpty || text.contains("\n") { badMessages.append(text) }
            } else {
                outcomes.decoded += 1
            }
            #expect(result.bytesFed <= mutated.stream.count)
        }
        #expect(badMessages.isEmpty, "errors that are not one line: \(badMessages.prefix(3))")
        // The mutations reach the decoders: a good share is refused (else the fuzzer exercises
        // nothing), and some survive (flips inside pixel data decode to other pixels).
        #expect(outcomes.refused >= iterations / 10, "\(outcomes.refused) of \(iterations) mutated streams refused")
        #expect(outcomes.decoded > 0, "no mutated stream decoded: the mutations never land in pixel data")
        // After all that, the pristine stream still decodes to the same picture (no state leaks
        // between runs, e.g. through a shared zlib or JPEG handle).
        let again = try RFBReplay.run(capture)
        let first = try RFBReplay.run(capture)
        #expect(again.error == nil && again.framebuffer == first.framebuffer)
    }

    /// One random mutation, biased towards the part after the handshake where decoders run.
    private func mutate(_ bytes: inout [UInt8], _ rng: inout SplitMix) {
        guard bytes.count > 64 else { return }
        let start = min(40, bytes.count - 1)
        func position() -> Int { start + rng.below(bytes.count - start) }
        switch rng.below(7) {
        case 0:
            for _ in 0...rng.below(8) { bytes[position()] ^= UInt8(1 << rng.below(8)) }
        case 1:
            let p = min(position(), bytes.count - 4)
            let hostile: [[UInt8]] = [[0xFF, 0xFF, 0xFF, 0xFF], [0x7F, 0xFF, 0xFF, 0xFF], [0, 0, 0, 0], [0x80, 0, 0, 0], [0, 0, 0xFF, 0xFF]]
            let value = hostile[rng.below(hostile.count)]
            for i in 0..<4 { bytes[p + i] = value[i] }
        case 2:
            bytes.removeSubrange(position()...)
        case 3:
            let p = position()
            bytes.removeSubrange(p..<min(bytes.count, p + 1 + rng.below(64)))
        case 4:
            let p = position()
            bytes.insert(contentsOf: (0..<(1 + rng.below(32))).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: p)
        case 5:
            let p = position()
            let chunk = Array(bytes[p..<min(bytes.count, p + 1 + rng.below(512))])
            bytes.insert(contentsOf: chunk, at: position())
        default:
            for _ in 0..<(1 + rng.below(64)) { bytes[position()] = UInt8(truncatingIfNeeded: rng.next()) }
        }
    }
}

@Suite struct CaptureTests {
    @Test(arguments: FuzzTests.captureNames)
    func aCaptureCutAnywhereTrimsBackToWholeMessages(name: String) throws {
        let capture = try FuzzTests.load(name)
        let full = try RFBReplay.run(capture)
        #expect(full.lastMessageBoundary == capture.stream.count, "a recorded capture ends on a message boundary")
        for cut in [capture.stream.count * 2 / 3, capture.stream.count / 2 + 7, capture.stream.count - 3] {
            var partial = capture
            partial.stream = capture.stream.prefix(cut)
            #expect(try RFBReplay.run(partial).error != nil, "cut inside a message, the stream must not decode to its end")
            let trimmed = try partial.trimmedToLastCompleteMessage()
            #expect(trimmed.stream.count <= cut)
            #expect(try RFBReplay.run(trimmed).error == nil)
        }
    }

    @Test func captureFilesRoundTrip() throws {
        let capture = RFBCapture(metadata: .init(pixelFormat: .rgb565, encodings: [.zrle, .cursor], server: "test"), stream: [1, 2, 3])
        let parsed = try RFBCapture(bytes: capture.serialized())
        #expect(Array(parsed.stream) == [1, 2, 3])
        #expect(try parsed.metadata.decodedPixelFormat() == .rgb565)
        #expect(parsed.metadata.encodings == [16, -239])
        #expect(throws: RFBCapture.CaptureError.self) { try RFBCapture(bytes: Array("not a capture".utf8)) }
    }
}
