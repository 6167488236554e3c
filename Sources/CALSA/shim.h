// ALSA for the Sendspin output: a few helpers over alsa-lib's C API, so Swift needs none of its
// allocation macros (snd_pcm_*_alloca) and gets one call per step.
#include <alsa/asoundlib.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static void calsa_discard_error(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

/// alsa-lib prints its own diagnostics to stderr; farcast reports errors itself, once.
static inline void calsa_quiet_errors(void) { snd_lib_error_set_handler(calsa_discard_error); }

/// Opens a PCM for `stream`. With `config` (ALSA configuration text), `name` resolves in that
/// text alone, on top of alsa-lib's own plugin definitions — tests use it to reach a private
/// sound server without touching the machine's configuration.
/// A private copy of the global configuration tree plus `config`'s text. It stays allocated for
/// the life of the process (what is opened with it may refer into it), a few kilobytes.
static inline int calsa_private_tree(const char *config, snd_config_t **tree) {
    snd_config_t *global = NULL;
    snd_input_t *input = NULL;
    int err = snd_config_update_ref(&global);
    if (err < 0) return err;
    err = snd_config_copy(tree, global);
    snd_config_unref(global);
    if (err < 0) return err;
    err = snd_input_buffer_open(&input, config, (ssize_t)strlen(config));
    if (err >= 0) {
        err = snd_config_load(*tree, input);
        snd_input_close(input);
    }
    return err;
}

static inline int calsa_open(snd_pcm_t **pcm, const char *name, const char *config, snd_pcm_stream_t stream) {
    if (config == NULL) return snd_pcm_open(pcm, name, stream, 0);
    snd_config_t *tree = NULL;
    int err = calsa_private_tree(config, &tree);
    if (err >= 0) err = snd_pcm_open_lconf(pcm, name, stream, 0, tree);
    return err;
}

/// Opens the mixer of control device `device` (with `config` as for `calsa_open`) and finds its
/// simple element `control`,`index` with a playback volume. -ENOENT when there is none.
static inline int calsa_mixer_open(snd_mixer_t **mixer, snd_mixer_elem_t **elem, const char *device, const char *config,
                                   const char *control, unsigned index) {
    snd_ctl_t *ctl = NULL;
    snd_hctl_t *hctl = NULL;
    snd_mixer_selem_id_t *id = NULL;
    int err;
    *mixer = NULL;
    if (config == NULL) {
        err = snd_ctl_open(&ctl, device, 0);
    } else {
        snd_config_t *tree = NULL;
        err = calsa_private_tree(config, &tree);
        if (err >= 0) err = snd_ctl_open_lconf(&ctl, device, 0, tree);
    }
    if (err < 0) return err;
    if ((err = snd_hctl_open_ctl(&hctl, ctl)) < 0) { snd_ctl_close(ctl); return err; }
    if ((err = snd_mixer_open(mixer, 0)) < 0) { snd_hctl_close(hctl); return err; }
    if ((err = snd_mixer_attach_hctl(*mixer, hctl)) < 0) { snd_hctl_close(hctl); goto fail; }
    if ((err = snd_mixer_selem_register(*mixer, NULL, NULL)) < 0) goto fail;
    if ((err = snd_mixer_load(*mixer)) < 0) goto fail;
    if ((err = snd_mixer_selem_id_malloc(&id)) < 0) goto fail;
    snd_mixer_selem_id_set_name(id, control);
    snd_mixer_selem_id_set_index(id, index);
    *elem = snd_mixer_find_selem(*mixer, id);
    snd_mixer_selem_id_free(id);
    if (*elem == NULL || !snd_mixer_selem_has_playback_volume(*elem)) { err = -ENOENT; goto fail; }
    return 0;
fail:
    snd_mixer_close(*mixer);
    *mixer = NULL;
    return err;
}

/// Sets the element to `percent` (0…100) on the curve the player's software volume uses
/// (amplitude (percent/100)^1.5, i.e. 30·log10(percent/100) dB) when it says its range in dB,
/// else linearly over its raw range (what amixer shows as percent); `muted` through its playback
/// switch, or as the lowest volume when it has none. Returns 1 when the dB curve was used.
static inline int calsa_mixer_set(snd_mixer_elem_t *elem, int percent, int muted) {
    long min = 0, max = 0, dbmin = 0, dbmax = 0;
    int err, db = 0;
    if (percent < 0) percent = 0;
    if (percent > 100) percent = 100;
    if (snd_mixer_selem_get_playback_dB_range(elem, &dbmin, &dbmax) == 0 && dbmin < dbmax) {
        long target = percent == 0 ? dbmin : (long)(3000.0 * log10(percent / 100.0));
        if (target < dbmin) target = dbmin;
        if (target > dbmax) target = dbmax;
        err = snd_mixer_selem_set_playback_dB_all(elem, target, 0);
        db = 1;
    } else {
        if ((err = snd_mixer_selem_get_playback_volume_range(elem, &min, &max)) < 0) return err;
        err = snd_mixer_selem_set_playback_volume_all(elem, min + (long)((double)(max - min) * percent / 100.0 + 0.5));
    }
    if (err < 0) return err;
    if (snd_mixer_selem_has_playback_switch(elem)) {
        err = snd_mixer_selem_set_playback_switch_all(elem, muted ? 0 : 1);
    } else if (muted) {
        snd_mixer_selem_get_playback_volume_range(elem, &min, &max);
        err = snd_mixer_selem_set_playback_volume_all(elem, min);
    }
    return err < 0 ? err : db;
}

static inline int calsa_open_playback(snd_pcm_t **pcm, const char *name, const char *config) {
    return calsa_open(pcm, name, config, SND_PCM_STREAM_PLAYBACK);
}

static inline int calsa_open_capture(snd_pcm_t **pcm, const char *name, const char *config) {
    return calsa_open(pcm, name, config, SND_PCM_STREAM_CAPTURE);
}

/// Sets interleaved access, the sample format, channels and the exact rate (no alsa-lib
/// resampling), a buffer and period near the times asked (µs); then software parameters for a
/// manual start, wake-ups per period and CLOCK_MONOTONIC_RAW status timestamps. Returns the
/// sizes granted and whether the timestamps are CLOCK_MONOTONIC_RAW (`raw_tstamp`).
static inline int calsa_configure(snd_pcm_t *pcm, snd_pcm_format_t format, unsigned channels, unsigned rate,
                                  unsigned buffer_us, unsigned period_us,
                                  snd_pcm_uframes_t *buffer_size, snd_pcm_uframes_t *period_size, int *raw_tstamp) {
    snd_pcm_hw_params_t *hw = NULL;
    snd_pcm_sw_params_t *sw = NULL;
    int err = snd_pcm_hw_params_malloc(&hw);
    if (err < 0) return err;
    unsigned bt = buffer_us, pt = period_us;
    if ((err = snd_pcm_hw_params_any(pcm, hw)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_format(pcm, hw, format)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_channels(pcm, hw, channels)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_rate_resample(pcm, hw, 0)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_rate(pcm, hw, rate, 0)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_buffer_time_near(pcm, hw, &bt, NULL)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_period_time_near(pcm, hw, &pt, NULL)) < 0) goto out;
    if ((err = snd_pcm_hw_params(pcm, hw)) < 0) goto out;
    snd_pcm_hw_params_get_buffer_size(hw, buffer_size);
    snd_pcm_hw_params_get_period_size(hw, period_size, NULL);
    if ((err = snd_pcm_sw_params_malloc(&sw)) < 0) goto out;
    snd_pcm_uframes_t boundary = 0;
    if ((err = snd_pcm_sw_params_current(pcm, sw)) < 0) goto out;
    snd_pcm_sw_params_get_boundary(sw, &boundary);
    if ((err = snd_pcm_sw_params_set_start_threshold(pcm, sw, boundary)) < 0) goto out;
    if ((err = snd_pcm_sw_params_set_avail_min(pcm, sw, *period_size)) < 0) goto out;
    if ((err = snd_pcm_sw_params_set_tstamp_mode(pcm, sw, SND_PCM_TSTAMP_ENABLE)) < 0) goto out;
    *raw_tstamp = snd_pcm_sw_params_set_tstamp_type(pcm, sw, SND_PCM_TSTAMP_TYPE_MONOTONIC_RAW) >= 0;
    err = snd_pcm_sw_params(pcm, sw);
out:
    if (sw) snd_pcm_sw_params_free(sw);
    snd_pcm_hw_params_free(hw);
    return err;
}

/// One consistent reading: the status timestamp (ns), frames queued ahead of the DAC, frames
/// writable now, and the stream state.
static inline int calsa_status(snd_pcm_t *pcm, int64_t *htstamp_ns, snd_pcm_sframes_t *delay, snd_pcm_sframes_t *avail,
                               int *state) {
    snd_pcm_status_t *status = NULL;
    int err = snd_pcm_status_malloc(&status);
    if (err < 0) return err;
    err = snd_pcm_status(pcm, status);
    if (err >= 0) {
        snd_htimestamp_t ts;
        snd_pcm_status_get_htstamp(status, &ts);
        *htstamp_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        *delay = snd_pcm_status_get_delay(status);
        *avail = (snd_pcm_sframes_t)snd_pcm_status_get_avail(status);
        *state = (int)snd_pcm_status_get_state(status);
    }
    snd_pcm_status_free(status);
    return err;
}

static inline const char *calsa_error(int err) { return snd_strerror(err); }
static inline int calsa_state_running(void) { return SND_PCM_STATE_RUNNING; }
static inline int calsa_state_xrun(void) { return SND_PCM_STATE_XRUN; }

/// A capture PCM as 16-bit interleaved at `rate` and `channels`, alsa-lib resampling and
/// converting where the device differs (a microphone at 44.1 kHz mono still records as asked),
/// periods near `period_us`; reading starts it.
static inline int calsa_configure_capture(snd_pcm_t *pcm, unsigned channels, unsigned rate, unsigned period_us,
                                          snd_pcm_uframes_t *period_size) {
    snd_pcm_hw_params_t *hw = NULL;
    int err = snd_pcm_hw_params_malloc(&hw);
    if (err < 0) return err;
    unsigned pt = period_us, bt = period_us * 4;
    if ((err = snd_pcm_hw_params_any(pcm, hw)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_channels(pcm, hw, channels)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_rate_resample(pcm, hw, 1)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_rate(pcm, hw, rate, 0)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_period_time_near(pcm, hw, &pt, NULL)) < 0) goto out;
    if ((err = snd_pcm_hw_params_set_buffer_time_near(pcm, hw, &bt, NULL)) < 0) goto out;
    if ((err = snd_pcm_hw_params(pcm, hw)) < 0) goto out;
    snd_pcm_hw_params_get_period_size(hw, period_size, NULL);
out:
    snd_pcm_hw_params_free(hw);
    return err;
}
