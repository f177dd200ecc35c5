# The router: Debian 12's nginx (1.22) with the set-misc module (set_unescape_uri, for the
# ?user_id= of Open WebUI's previews), serving the ring `agentbox cluster nginx-conf` writes.
# The ConfigMap agentbox-router is mounted at /etc/agentbox (deploy/k8s/base/router.yaml).
#   docker build -f deploy/docker/router.Dockerfile -t agentbox-router deploy/docker
FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx libnginx-mod-http-set-misc \
 && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default \
 && echo 'include /etc/agentbox/*.conf;' > /etc/nginx/conf.d/agentbox.conf \
 && ln -sf /dev/stderr /var/log/nginx/error.log && ln -sf /dev/stdout /var/log/nginx/access.log
EXPOSE 8000
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
