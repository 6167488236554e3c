import Foundation

/// The BlurHash of an image (the compact placeholder Jellyfin sends in `ImageBlurHashes`),
/// computed from its pixels: a few cosine components of the linear-light image, quantised and
/// written in base 83. Written from the format's description (components header, DC as 24-bit
/// sRGB, AC quantised with a shared maximum), so the stand-in's hashes are real ones.
enum BlurHash {
    /// `rgb` holds width × height pixels, three bytes each (sRGB).
    static func encode(rgb: [UInt8], width: Int, height: Int, componentsX: Int = 4, componentsY: Int = 3) -> String {
        precondition(rgb.count >= width * height * 3 && (1...9).contains(componentsX) && (1...9).contains(componentsY))
        var factors: [(Double, Double, Double)] = []
        for j in 0..<componentsY {
            for i in 0..<componentsX {
                let normalisation = (i == 0 && j == 0) ? 1.0 : 2.0
                var r = 0.0, g = 0.0, b = 0.0
                for y in 0..<height {
                    let cy = cos(Double.pi * Double(j) * Double(y) / Double(height))
                    for x in 0..<width {
                        let basis = normalisation * cos(Double.pi * Double(i) * Double(x) / Double(width)) * cy
                        let p = (y * width + x) * 3
                        r += basis * linear(rgb[p])
                        g += basis * linear(rgb[p + 1])
                        b += basis * linear(rgb[p + 2])
                    }
                }
                let scale = 1.0 / Double(width * height)
                factors.append((r * scale, g * scale, b * scale))
            }
        }
        var hash = base83(UInt64((componentsX - 1) + (componentsY - 1) * 9), length: 1)
        let ac = factors.dropFirst()
        var maximum = 1.0
        if !ac.isEmpty {
            let actual = ac.map { max(abs($0.0), abs($0.1), abs($0.2)) }.max() ?? 0
            let quantised = Int(max(0, min(82, floor(actual * 166 - 0.5))))
            maximum = Double(quantised + 1) / 166
            hash += base83(UInt64(quantised), length: 1)
        } else {
            hash += base83(0, length: 1)
        }
        let dc = factors[0]
        hash += base83(UInt64(srgb(dc.0)) << 16 | UInt64(srgb(dc.1)) << 8 | UInt64(srgb(dc.2)), length: 4)
        for f in ac {
            func q(_ v: Double) -> UInt64 {
                UInt64(max(0, min(18, floor(signPow(v / maximum, 0.5) * 9 + 9.5))))
            }
            hash += base83(q(f.0) * 19 * 19 + q(f.1) * 19 + q(f.2), length: 2)
        }
        return hash
    }

    private static let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~")

    private static func base83(_ value: UInt64, length: Int) -> String {
        var out = ""
        for i in 1...length {
            var divisor: UInt64 = 1
            for _ in 0..<(length - i) { divisor *= 83 }
            out.append(alphabet[Int((value / divisor) % 83)])
        }
        return out
    }

    private static func linear(_ value: UInt8) -> Double {
        let v = Double(value) / 255
        return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
    }

    private static func srgb(_ value: Double) -> Int {
        let v = max(0, min(1, value))
        return v <= 0.0031308 ? Int(v * 12.92 * 255 + 0.5) : Int((1.055 * pow(v, 1 / 2.4) - 0.055) * 255 + 0.5)
    }

    private static func signPow(_ value: Double, _ exponent: Double) -> Double {
        (value < 0 ? -1 : 1) * pow(abs(value), exponent)
    }
}
