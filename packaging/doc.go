// Package packaging holds what installs pcp-exporter on a PCP host: the nfpm
// configuration of the .deb and .rpm (make package), the hardened systemd
// unit and socket, /etc/default/pcp-exporter and the maintainer scripts. It
// has no Go code but its tests, which build or take the packages, install the
// .deb and run the service's command line as the packaged user.
package packaging
