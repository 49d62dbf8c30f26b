package apps

import (
	"os"
	"path/filepath"
	"strings"
)

// sweep removes what a previous run left on disk and nothing refers to:
// the work dirs of deploys the server stopped in (their clones), git
// repositories half made, and the repositories of apps that no longer
// exist. Releases and their snapshots are pruned as deploys go live
// (prune) and go with their app (Delete).
func (s *Service) sweep(apps []App) {
	if s.cfg.WorkDir == "" {
		return
	}
	entries, _ := os.ReadDir(s.cfg.WorkDir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "deploy-") {
			s.remove(filepath.Join(s.cfg.WorkDir, e.Name()), "unfinished deploy's work dir")
		}
	}
	if s.deps != nil {
		ids := map[string]bool{}
		for _, a := range apps {
			ids[a.TeamID+"/"+a.ID] = true
		}
		for _, d := range s.deps.Sweep(func(team, app string) bool { return ids[team+"/"+app] }) {
			s.log.Info("swept dependency cache of no app", "path", d)
		}
	}
	if s.cfg.RepoDir == "" {
		return
	}
	known := map[string]bool{}
	for _, a := range apps {
		known[a.ID+".git"] = true
	}
	repos, _ := os.ReadDir(s.cfg.RepoDir)
	for _, e := range repos {
		if e.IsDir() && !known[e.Name()] && strings.Contains(e.Name(), ".git") {
			s.remove(filepath.Join(s.cfg.RepoDir, e.Name()), "git repository of no app")
		}
	}
}

func (s *Service) remove(path, what string) {
	if err := os.RemoveAll(path); err != nil {
		s.log.Warn("sweep "+what, "path", path, "err", err)
		return
	}
	s.log.Info("swept "+what, "path", path)
}
