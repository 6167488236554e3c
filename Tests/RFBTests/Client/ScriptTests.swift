import FarcastSupport
@testable import RFB
import Testing

/// The `farcast vnc do` script language and the PNG reader behind `expect-screen`.
@Suite struct ScriptTests {
    @Test func everyStepParses() throws {
        let script = try VNCScript.parse("""
            # a comment, then a blank line

            type Hello, wörld\\n
            key ctrl+alt+Delete Return
            keydown shift
            keyup shift
            move 10 20
            moveby 0.5 -1.25
            click
            click 5 6 button=3 count=2
            mousedown 1
            mouseup 1
            scroll down 3
            wait 0.25
            sync
            clipboard set line1\\nline2 \\\\ end
            clipboard get wait=5
            resize 1280x720
            screenshot /tmp/a.png monitor=1
            expect-screen /tmp/b.png tolerance=2.5 timeout=20
            """)
        let steps = script.steps.map(\.step)
        #expect(steps == [
            .type("Hello, wörld\n"), .key(["ctrl+alt+Delete", "Return"]), .keyDown("shift"), .keyUp("shift"),
            .move(x: 10, y: 20), .moveBy(dx: 0.5, dy: -1.25), .click(x: nil, y: nil, button: 1, count: 1),
            .click(x: 5, y: 6, button: 3, count: 2), .buttonDown(1), .buttonUp(1), .scroll(.down, clicks: 3),
            .wait(seconds: 0.25), .sync, .setClipboard("line1\nline2 \\ end"), .getClipboard(wait: 5),
            .resize(width: 1280, height: 720), .screenshot(path: "/tmp/a.png", monitor: 1),
            .expectScreen(path: "/tmp/b.png", monitor: nil, tolerance: 2.5, timeout: 20),
        ])
        #expect(script.steps.first?.line == 3, "line numbers count comments and blank lines")
    }

    @Test func typeKeepsTheRestOfTheLineVerbatim() throws {
        #expect(try VNCScript.parseStep("type   two  spaces ") == .type("  two  spaces "))
        #expect(try VNCScript.parseStep("clipboard get") == .getClipboard(wait: 2))
    }

    @Test func mistakesNameTheLineAndTheProblem() {
        func failure(_ text: String) -> VNCScript.ParseError? {
            do { _ = try VNCScript.parse(text); return nil } catch { return error.errors.first }
        }
        #expect(failure("type a\nbogus 1")?.line == 2)
        #expect(failure("bogus")?.message.contains("unknown step 'bogus'") == true)
        #expect(failure("key ctrl+nope")?.message.contains("unknown key 'nope'") == true)
        #expect(failure("move 10")?.message == "usage: move X Y")
        #expect(failure("move ten 10")?.message == "X must be a number, not 'ten'")
        #expect(failure("click 1 2 button=16")?.message == "button must be 1–15")
        #expect(failure("click 1 2 colour=red")?.message.contains("unexpected 'colour=red'") == true)
        #expect(failure("scroll sideways")?.message.contains("up, down, left or right") == true)
        #expect(failure("wait -1") != nil)
        #expect(failure("resize 0x10") != nil)
        #expect(failure("resize 20000x10") != nil)
        #expect(failure("type trailing\\") != nil)
        #expect(failure("type bad \\q escape") != nil)
        #expect(failure("expect-screen a.png tolerance=300") != nil)
        #expect(failure("moveby nan 1") != nil)
    }

    @Test func everyBadLineIsReportedAtOnce() {
        do {
            _ = try VNCScript.parse("bogus\ntype fine\n# comment\nmove 10\nclick 1 2 button=16")
            Issue.record("a script with three bad lines parsed")
        } catch {
            #expect(error.errors.map(\.line) == [1, 4, 5])
            #expect(error.description.hasPrefix("line 1: unknown step 'bogus'"))
            #expect(error.description.contains("line 4: usage: move X Y; line 5: button must be 1–15"))
        }
    }

    @Test func theFilesAScriptUsesAreListedByLine() throws {
        let script = try VNCScript.parse("screenshot a.png\nexpect-screen b.png\ntype x\nscreenshot c.jpg monitor=1")
        #expect(script.files.read.map(\.path) == ["b.png"])
        #expect(script.files.written.map(\.line) == [1, 4])
    }

    @Test func aFileAnEarlierStepWritesIsNotAnInput() throws {
        // Read before it is written: an input. Written, then read (under any spelling): the script's own.
        let script = try VNCScript.parse("expect-screen a.png\nscreenshot a.png\nexpect-screen ./a.png\nscreenshot /tmp/b.png\nexpect-screen /tmp/x/../b.png\nexpect-screen c.png")
        #expect(script.files.read.map(\.line) == [1, 6])
        #expect(script.files.read.map(\.path) == ["a.png", "c.png"])
        #expect(script.files.written.map(\.path) == ["a.png", "/tmp/b.png"])
    }

    @Test func sizesParse() throws {
        #expect(try VNCScript.parseSize("1920x1080") == (1920, 1080))
        #expect(try VNCScript.parseSize("800X600") == (800, 600))
        #expect(throws: VNCScript.ParseError.self) { try VNCScript.parseSize("800") }
    }

    // MARK: - PNG

    @Test func pngRoundTripsThroughOurEncoder() throws {
        var fb = Framebuffer(width: 37, height: 11)
        for i in fb.pixels.indices { fb.pixels[i] = 0xFF00_0000 | UInt32(truncatingIfNeeded: i &* 2_654_435_761) & 0xFF_FFFF }
        let decoded = try PNGDecoder.decode(try PNGEncoder.encode(fb))
        #expect(decoded == fb)
        #expect(PNGDecoder.meanDifference(decoded, fb) == 0)
        #expect(PNGDecoder.meanDifference(decoded, Framebuffer(width: 1, height: 1)) == nil)
    }

    /// A PNG written the way other tools write them: RGBA, every filter type, IDAT split in two.
    @Test func pngWithEveryFilterAndAlphaDecodes() throws {
        let width = 5, height = 5, channels = 4
        var pixels: [[UInt8]] = []
        for y in 0..<height { pixels.append((0..<width * channels).map { UInt8(truncatingIfNeeded: $0 * 37 + y * 91 + ($0 % 4 == 3 ? 255 : 0)) }) }
        func paeth(_ a: Int, _ b: Int, _ c: Int) -> Int {
            let pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c)
            return pa <= pb && pa <= pc ? a : pb <= pc ? b : c
        }
        var raw: [UInt8] = []
        for y in 0..<height {
            let filter = y   // 0 none, 1 sub, 2 up, 3 average, 4 paeth
            raw.append(UInt8(filter))
            for i in 0..<width * channels {
                let x = Int(pixels[y][i])
                let a = i >= channels ? Int(pixels[y][i - channels]) : 0
                let b = y > 0 ? Int(pixels[y - 1][i]) : 0
                let c = i >= channels && y > 0 ? Int(pixels[y - 1][i - channels]) : 0
                let predictor = [0, a, b, (a + b) / 2, paeth(a, b, c)][filter]
                raw.append(UInt8(truncatingIfNeeded: x - predictor))
            }
        }
        let compressed = try ExtendedClipboard.deflateAll(raw)
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        func chunk(_ type: String, _ body: [UInt8]) {
            var w = ByteWriter()
            w.writeInteger(UInt32(body.count))
            w.writeBytes(Array(type.utf8))
            w.writeBytes(body)
            w.writeInteger(UInt32(0))   // CRC: not checked by the reader
            png += w.bytes
        }
        var header = ByteWriter()
        header.writeInteger(UInt32(width))
        header.writeInteger(UInt32(height))
        header.writeBytes([8, 6, 0, 0, 0])
        chunk("IHDR", header.bytes)
        chunk("tEXt", Array("Comment\u{0}made in a test".utf8))
        chunk("IDAT", Array(compressed.prefix(compressed.count / 2)))
        chunk("IDAT", Array(compressed.dropFirst(compressed.count / 2)))
        chunk("IEND", [])
        let fb = try PNGDecoder.decode(png)
        for y in 0..<height {
            for x in 0..<width {
                let p = pixels[y][(x * 4)..<(x * 4 + 3)].map(UInt32.init)
                #expect(fb.pixels[y * width + x] & 0xFF_FFFF == p[0] << 16 | p[1] << 8 | p[2], "pixel (\(x), \(y)), filter \(y)")
            }
        }
    }

    @Test func brokenPNGsAreTypedErrors() throws {
        let good = try PNGEncoder.encode(Framebuffer(width: 8, height: 8))
        #expect(throws: PNGDecoder.DecodingFailed.self) { try PNGDecoder.decode(Array(good.prefix(40))) }
        #expect(throws: PNGDecoder.DecodingFailed.self) { try PNGDecoder.decode(Array("GIF89a".utf8)) }
        var corrupt = good
        corrupt[45] ^= 0xFF   // inside the IDAT data
        #expect(throws: (any Error).self) { try PNGDecoder.decode(corrupt) }
        var fuzz = SplitMix(seed: 7)
        for _ in 0..<300 {
            var mutated = good
            for _ in 0..<3 { mutated[fuzz.below(mutated.count)] = UInt8(fuzz.below(256)) }
            _ = try? PNGDecoder.decode(mutated)   // must not trap
        }
    }
}
