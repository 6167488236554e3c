#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <gnutls/abstract.h>

// ngtcp2 0.12 exposes its entry points as function-like macros that pass the struct versions
// this header was built with; Swift cannot import such macros, so each gets an inline twin.

static inline void cngtcp2_settings_default(ngtcp2_settings *settings) {
    ngtcp2_settings_default(settings);
}

static inline void cngtcp2_transport_params_default(ngtcp2_transport_params *params) {
    ngtcp2_transport_params_default(params);
}

static inline int cngtcp2_conn_client_new(ngtcp2_conn **pconn, const ngtcp2_cid *dcid, const ngtcp2_cid *scid,
                                          const ngtcp2_path *path, uint32_t version,
                                          const ngtcp2_callbacks *callbacks, const ngtcp2_settings *settings,
                                          const ngtcp2_transport_params *params, void *user_data) {
    return ngtcp2_conn_client_new(pconn, dcid, scid, path, version, callbacks, settings, params, NULL, user_data);
}

static inline int cngtcp2_conn_read_pkt(ngtcp2_conn *conn, const ngtcp2_path *path, const uint8_t *pkt,
                                        size_t pktlen, ngtcp2_tstamp ts) {
    ngtcp2_pkt_info pi = {0};
    return ngtcp2_conn_read_pkt(conn, path, &pi, pkt, pktlen, ts);
}

static inline ngtcp2_ssize cngtcp2_conn_writev_stream(ngtcp2_conn *conn, ngtcp2_path *path, uint8_t *dest,
                                                      size_t destlen, ngtcp2_ssize *pdatalen, uint32_t flags,
                                                      int64_t stream_id, const ngtcp2_vec *datav,
                                                      size_t datavcnt, ngtcp2_tstamp ts) {
    ngtcp2_pkt_info pi;
    return ngtcp2_conn_writev_stream(conn, path, &pi, dest, destlen, pdatalen, flags, stream_id, datav, datavcnt, ts);
}

static inline ngtcp2_ssize cngtcp2_conn_writev_datagram(ngtcp2_conn *conn, ngtcp2_path *path, uint8_t *dest,
                                                        size_t destlen, int *paccepted, uint32_t flags,
                                                        uint64_t dgram_id, const ngtcp2_vec *datav,
                                                        size_t datavcnt, ngtcp2_tstamp ts) {
    ngtcp2_pkt_info pi;
    return ngtcp2_conn_writev_datagram(conn, path, &pi, dest, destlen, paccepted, flags, dgram_id, datav, datavcnt, ts);
}

static inline ngtcp2_ssize cngtcp2_conn_write_connection_close(ngtcp2_conn *conn, ngtcp2_path *path, uint8_t *dest,
                                                               size_t destlen, const ngtcp2_connection_close_error *ccerr,
                                                               ngtcp2_tstamp ts) {
    ngtcp2_pkt_info pi;
    return ngtcp2_conn_write_connection_close(conn, path, &pi, dest, destlen, ccerr, ts);
}

static inline void cngtcp2_conn_get_conn_stat(ngtcp2_conn *conn, ngtcp2_conn_stat *cstat) {
    ngtcp2_conn_get_conn_stat(conn, cstat);
}

// GNUTLS_CURVE_TO_BITS is a macro too.
static inline unsigned int cngtcp2_gnutls_p256_bits(void) {
    return GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1);
}

// gnutls_free is a macro-wrapped global function pointer, which Swift 6 refuses to read. On
// Linux, where GnuTLS is opened on first use, CNGTCP2Loader reads it from the library it opened.
#if defined(__linux__)
void cngtcp2_gnutls_free(void *p);
#else
static inline void cngtcp2_gnutls_free(void *p) {
    gnutls_free(p);
}
#endif
