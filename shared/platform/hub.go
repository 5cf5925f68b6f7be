package platform

// HubMeta is the hub's counters of an integration version.
type HubMeta struct {
	Installs int64 `json:"installs"`
	Views    int64 `json:"views"` // not counted: always 0
}

// PublicIntegrationSummary is an integration as listPublicIntegrations
// answers it.
type PublicIntegrationSummary struct {
	IntegrationSummary
	Meta HubMeta `json:"meta"`
}

// PublicIntegration is an integration as getPublicIntegration(ById)
// answers it: the full form without what only its developers see (the
// signing secret, maxConcurrency), with its publisher and counters.
type PublicIntegration struct {
	Integration
	OwnerWorkspace OwnerWorkspace `json:"ownerWorkspace"`
	Meta           HubMeta        `json:"meta"`
}

// HubForm is the hub form of i, published by owner.
func (i Integration) HubForm(owner OwnerWorkspace) PublicIntegration {
	i.SigningSecret, i.MaxConcurrency = "", nil
	if i.Secrets == nil {
		i.Secrets = []string{}
	}
	return PublicIntegration{Integration: i, OwnerWorkspace: owner, Meta: HubMeta{Installs: i.InstallCount}}
}
