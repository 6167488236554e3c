-- Loaded into mpv by scripts/lib/bench/first_frame.py (as --script=…): when the file's first
-- frame is ready (mpv's first playback-restart: decoded, shown, playing or paused at the start
-- point) it writes one line into the FIFO named by --script-opts=first_frame-fifo=PATH, where the
-- harness is waiting with its clock. The same moment for mpv alone and for mpv under farcast.
local options = { fifo = "" }
require("mp.options").read_options(options, "first_frame")
mp.register_event("playback-restart", function()
    if options.fifo == "" then return end
    local fifo = io.open(options.fifo, "w")
    if fifo then
        fifo:write("ready\n")
        fifo:close()
    end
    options.fifo = ""
end)
