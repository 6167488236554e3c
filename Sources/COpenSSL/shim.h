// OpenSSL 3's libcrypto EVP interface: the punktfunk data plane opens and seals datagrams in place
// with a reused cipher context (no allocation per packet), which swift-crypto's API cannot do.
#include <openssl/evp.h>
// libssl for RFB's anonymous TLS (VeNCrypt TLSNone/TLSVnc/TLSPlain): anonymous Diffie-Hellman
// cipher suites, which BoringSSL (swift-nio-ssl) does not have.
#include <openssl/ssl.h>
#include <openssl/err.h>

// Macros Swift cannot import, as functions.
static inline long farcast_ssl_ctx_max_tls12(SSL_CTX *ctx) { return SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION); }
static inline long farcast_ssl_ctx_min_tls10(SSL_CTX *ctx) { return SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION); }
