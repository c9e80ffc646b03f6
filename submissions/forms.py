from django import forms


class UploadForm(forms.Form):
    archive = forms.FileField(help_text=".tar.gz, .tgz or .zip holding your Harbor job directories")
    metadata = forms.FileField(required=False,
                               help_text="metadata.yaml or .json (optional if in the archive)")


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, initial="cli")


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=5000, widget=forms.Textarea(attrs={"rows": 3}))
