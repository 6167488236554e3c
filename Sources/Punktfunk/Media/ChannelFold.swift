/// Fits decoded audio to the output's channels: 5.1 and 7.1 (Opus's Vorbis order: FL, FC, FR,
/// [SL, SR,] RL, RR, LFE) fold to stereo with the usual downmix weights (centre and surrounds at
/// −3 dB, LFE left out), scaled so that every channel at full scale cannot clip; stereo folds to
/// mono by averaging; mono spreads to every output channel; equal counts pass through. Any other
/// pair keeps the first channels and silences the rest.
public enum ChannelFold {
    /// Writes `frames` frames of `input` (interleaved, `from` channels) into `output`
    /// (interleaved, `to` channels), resizing it when it is too short.
    public static func fold(_ input: [Float], frames: Int, from: Int, to: Int, into output: inout [Float]) {
        let count = frames * to
        if output.count < count { output = [Float](repeating: 0, count: count) }
        guard from > 0, to > 0, input.count >= frames * from else {
            for i in 0..<count { output[i] = 0 }
            return
        }
        let c: Float = 0.70710678
        for f in 0..<frames {
            let i = f * from, o = f * to
            switch (from, to) {
            case (6, 2):
                let scale = 1 / (1 + 2 * c)
                output[o] = (input[i] + c * input[i + 1] + c * input[i + 3]) * scale
                output[o + 1] = (input[i + 2] + c * input[i + 1] + c * input[i + 4]) * scale
            case (8, 2):
                let scale = 1 / (1 + 3 * c)
                output[o] = (input[i] + c * input[i + 1] + c * input[i + 3] + c * input[i + 5]) * scale
                output[o + 1] = (input[i + 2] + c * input[i + 1] + c * input[i + 4] + c * input[i + 6]) * scale
            case (2, 1):
                output[o] = (input[i] + input[i + 1]) / 2
            case (1, _):
                for ch in 0..<to { output[o + ch] = input[i] }
            default:
                for ch in 0..<to { output[o + ch] = ch < from ? input[i + ch] : 0 }
            }
        }
    }
}
